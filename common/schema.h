// Versioned JSON documents: every document pipebal writes carries "schema": "pipebal.NAME/MAJOR".
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

namespace pipebal {

// "pipebal.plan/1" for ("pipebal.plan", 1).
std::string schema_tag(const std::string& name, int major);

// Nesting deeper than this is refused: no document pipebal reads comes near it, and walking one
// that does (dumping it, flattening a profile's environment) would recurse that deep.
constexpr int kMaxJsonDepth = 100;

// Parses JSON text; a syntax error, nesting past kMaxJsonDepth or a key given twice in one
// object becomes std::invalid_argument naming `what` (e.g. the path).
nlohmann::json parse_json(const std::string& text, const std::string& what);

// Accepts a document whose "schema" is `name` with major version `major` (any minor, e.g.
// "pipebal.plan/1.2"), or one without "schema" when `required` is false. Throws
// std::invalid_argument saying what was found and what is supported.
void check_schema(const nlohmann::json& doc, const std::string& name, int major, bool required);

}  // namespace pipebal
