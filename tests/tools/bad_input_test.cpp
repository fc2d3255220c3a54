// The bad-input table: each row is what a user typed (or a file a tool wrote), the exit status
// pipebal must give and a fragment of the one line it must print. Every row is one clear line on
// stderr, never a crash, a hang or garbage. README's reliability section counts these rows.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pipebal/common/cores.h"
#include "tests/tools/cli_support.h"

namespace pipebal::testing {
namespace {

struct BadInput {
  std::string args;      // after `pipebal`; {dir} is the test's scratch directory
  std::string fragment;  // in the one line on stderr
};

// {dir}: the test's scratch directory; {fixtures}: the TorchScript models tests/fixtures holds.
std::string expand(std::string text, const std::string& dir) {
  for (size_t at = text.find("{dir}"); at != std::string::npos; at = text.find("{dir}")) {
    text.replace(at, 5, dir);
  }
  const std::string fixtures = PIPEBAL_FIXTURES_DIR;
  for (size_t at = text.find("{fixtures}"); at != std::string::npos; at = text.find("{fixtures}")) {
    text.replace(at, 10, fixtures);
  }
  return text;
}

// Files the rows read: a profile with one absurd field each, plans read loosely before.
void write_inputs(const std::string& dir) {
  const auto layer = [](double forward_ms, int64_t param_bytes) {
    return nlohmann::json{{"name", "l"},           {"forward_ms", forward_ms},
                          {"backward_ms", 1.0},    {"param_bytes", param_bytes},
                          {"activation_bytes", 8}, {"output_bytes", 8}};
  };
  auto profile = [&](double forward_ms, int64_t param_bytes) {
    return nlohmann::json{{"layers", {layer(1, 8), layer(forward_ms, param_bytes), layer(1, 8)}}};
  };
  std::ofstream(dir + "/huge_bytes.json") << profile(1, int64_t{1} << 62);
  std::ofstream(dir + "/huge_ms.json") << profile(1e308, 8);
  std::ofstream(dir + "/ok.json") << profile(1, 8);
  // Nested far past any document pipebal writes, as a recursive walk of it would overflow.
  std::ofstream(dir + "/deep.json") << std::string(1'000'000, '[') << std::string(1'000'000, ']');
  // Links that lead nowhere a command could write or read: into a missing directory, in a loop.
  std::filesystem::create_symlink("missing/run", dir + "/dangling");
  std::filesystem::create_symlink("loop", dir + "/loop");
  // Measured at micro-batch sizes 4 and 8 of a mini-batch of 8, as `pipebal plan` wants.
  nlohmann::json sized = profile(1, 8);
  sized["input_shape"] = {8, 4};
  sized["batch_size"] = 4;
  sized["chunks"] = 2;
  sized["sizes"] = {{{"micro_batch_size", 4}, {"layers", sized["layers"]}},
                    {{"micro_batch_size", 8}, {"layers", sized["layers"]}}};
  std::ofstream(dir + "/sized.json") << sized;
  // Hand edits that make the profile's own numbers disagree.
  nlohmann::json inconsistent = sized;
  inconsistent["input_shape"] = {1, 4};
  std::ofstream(dir + "/more_chunks_than_samples.json") << inconsistent;
  inconsistent = sized;
  inconsistent["batch_size"] = 2;
  std::ofstream(dir + "/other_micro_batch.json") << inconsistent;
  nlohmann::json plan = {
      {"schema", "pipebal.plan/1"},
      {"algorithm", "dp"},
      {"balance", {1, 2}},
      {"bottleneck_ms", 1.0},
      {"chunks", 4},
      {"schedule", "gpipe"},
      {"checkpoint", "never"},
      {"param_scale", 2.0},
      {"stages",
       {{{"first_layer", 0}, {"layers", 1}, {"time_ms", 1.0}, {"memory_bytes", 8}},
        {{"first_layer", 1}, {"layers", 2}, {"time_ms", 1.0}, {"memory_bytes", 8}}}},
      {"prediction",
       {{"schedule", "gpipe"},
        {"chunks", 4},
        {"step_ms", 1.0},
        {"naive_step_ms", 1.0},
        {"speedup", 1.0},
        {"bubble_fraction", 0.0}}}};
  plan["chunks"] = 1e20;
  std::ofstream(dir + "/plan_chunks_1e20.json") << plan;
  plan["chunks"] = 2.7;
  std::ofstream(dir + "/plan_chunks_2.7.json") << plan;
  plan["chunks"] = 4;
  std::ofstream(dir + "/plan_unnamed.json") << plan;  // made from a profile without "model"
  nlohmann::json edited = plan;
  edited["stages"][1]["first_layer"] = 0;  // overlapping the first stage
  std::ofstream(dir + "/plan_overlap.json") << edited;
  edited = plan;
  edited["stages"][1]["layer_names"] = {"only_one"};
  std::ofstream(dir + "/plan_short_names.json") << edited;
  edited = plan;
  edited["prediction"]["chunks"] = 8;
  std::ofstream(dir + "/plan_other_prediction.json") << edited;
  edited = plan;
  edited["inputs"] = {"float33[4,8]"};
  std::ofstream(dir + "/plan_bad_input.json") << edited;
  plan["stages"][1]["speed"] = 0;  // the reader took it, the cost model refuses it
  std::ofstream(dir + "/plan_speed_0.json") << plan;
  std::ofstream(dir + "/malformed.json") << "{\"layers\": [";
  // A hand edit that gave "balance" again: which of the two was meant?
  std::string twice = plan.dump();
  twice.insert(1, "\"balance\": [2, 1], ");
  std::ofstream(dir + "/plan_balance_twice.json") << twice;
  ::mkfifo((dir + "/fifo").c_str(), 0600);
  // A validation directory whose timeline names stage 2e9 (the page would size itself by it).
  std::filesystem::copy(PIPEBAL_FIXTURES_DIR "/../reports/fixtures/validation_dir",
                        dir + "/huge_stage");
  auto validation = nlohmann::json::parse(read_text(dir + "/huge_stage/validation.json"));
  validation["candidates"][0]["measured"]["timeline"][0]["stage"] = 2000000000;
  std::ofstream(dir + "/huge_stage/validation.json") << validation;
  std::filesystem::create_directories(dir + "/project");
  std::ofstream(dir + "/project/notes.txt") << "the user's";
}

const std::vector<BadInput> kTable = {
    // Models and shapes.
    {"profile --model nosuchmodel", "unknown model 'nosuchmodel'"},
    {"profile --model mlp:width=x", "width"},
    {"profile --model mlp:depth=3", "model mlp has no option 'depth'"},
    {"profile --model mlp:layers=2,width=8 --input-shape 4,8 --rounds 0 -o {dir}/p.json",
     "--rounds must be at least 1, got 0"},
    {"profile --model mlp:layers=2,width=8 --input-shape 4,9", "layer 0 ('fc0'"},
    {"profile --model mlp:layers=2,width=8 --input-shape 4,x", "input shape '4,x'"},
    {"train --model mlp:layers=2,width=8 --input 'float32[4,8]' --input 'int64[4,3]:5' "
     "--balance 1,2",
     "model mlp takes one input tensor, given 2"},
    {"profile --model mlp:layers=2,width=8 --input 'float32[4,8]' --input 'float32[4,8]'",
     "model mlp takes one input tensor, given 2"},
    {"profile --model mlp:layers=2,width=8 --input-shape 9223372036854775807,8",
     "is more than 2147483647 in one dimension"},
    {"profile --model /missing/model.pt", "cannot load TorchScript model '/missing/model.pt'"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 1,2 --replicas 2",
     "2 replicas (--replicas, or the plan's) need one process per device and replica, 4 in all: "
     "start them with pipebal launch --nproc-per-node 4 (or torchrun)"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 1,2 --lr 1e39",
     "--lr must be positive and at most 3.4e+38, got 1e+39"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 1,2 --optimizer adam --lr "
     "1e38",
     "--lr must be positive and at most 3.4e+37 for adam, got 1e+38"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 1,2 --loss hinge",
     "unknown loss 'hinge' (valid: cross_entropy, mse, nll, none)"},
    // A newline in an argument the message quotes stays one line.
    {"balance \"$(printf '{dir}/missing\\nx.json')\" --stages 2", "{dir}/missing\\nx.json"},
    // Larger than any machine's memory: refused, not filled until the kernel kills the process.
    {"train --model mlp:layers=2,width=8 --balance 1,2 --input-shape 2147483647,2147483647",
     "input float32[2147483647,2147483647] needs"},
    {"profile --model mlp:layers=2,width=8 --input 'float32[2147483647,2147483647]'",
     "more than this machine's memory"},
    // Options out of range.
    {"profile --model mlp:layers=2,width=8 --repeat 0", "repeat must be >= 1"},
    {"profile --model mlp:layers=2,width=8 --threads 100000", "--threads must be between 0"},
    {"profile --model mlp:layers=2,width=8 --input-shape 4,8 --chunks 5",
     "--chunks 5 is more than the batch size 4"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --threads 100000",
     "threads per stage must be between 1 and the"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,2",
     "sums to 4, but the model has 3 layers"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 3,0", "balance"},
    {"train --model mlp:layers=600,width=2 --input-shape 4,2 --balance " +
         [] {
           std::string ones = "1";
           for (int i = 1; i < 601; ++i) ones += ",1";
           return ones;
         }(),
     "601 stages: at most 512"},
    {"balance {dir}/ok.json --stages 2 --chunks 100000",
     "micro-batches is beyond what pipebal plans"},
    {"balance {dir}/ok.json --stages 2 --chunks 0", "--chunks: must be at least 1, got 0"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --schedule interleaved "
     "--virtual 0",
     "--virtual: must be at least 1, got 0"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --stages 9 -o {dir}/v",
     "9 stages need at least 9 layers"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --schedule zigzag -o {dir}/v",
     "zigzag"},
    // Profiles and plans that say something absurd.
    {"balance {dir}/malformed.json --stages 2", "malformed.json"},
    {"balance {dir}/deep.json --stages 2", "deep.json: JSON nested deeper than 100 levels"},
    {"balance {dir}/huge_bytes.json --stages 2",
     "{dir}/huge_bytes.json: layer 1 ('l'): param_bytes is 4611686018427387904"},
    {"balance {dir}/huge_ms.json --stages 2",
     "{dir}/huge_ms.json: layer 1 ('l'): forward_ms is 1e+308"},
    {"balance {dir}/ok.json --stages 4", "4 stages need at least 4 layers"},
    {"balance {dir}/ok.json --stages 2 --device-speeds 1e-320,1", "device 0's speed is"},
    {"balance {dir}/ok.json --stages 2 --device-speeds 1e308,1e-308", "device 0's speed is 1e+308"},
    {"balance {dir}/ok.json --stages 2 --bandwidth 0GB/s", "must be at least 1 byte/s"},
    {"balance {dir}/ok.json --stages 2 --bandwidth 1e-300", "must be at least 1 byte/s"},
    {"balance {dir}/ok.json --stages 2 --param-scale 1e308", "param scale must be from 0 to 1e6"},
    {"balance {dir}/ok.json --stages 2 --memory-cap 1", "no partition of 3 layers into 2 stages"},
    {"balance {dir}/ok.json --stages 2 --schedule zb-h1 --weight-delays 0,x",
     "W delays '0,x': expected a count of micro-batches per stage"},
    {"balance {dir}/ok.json --stages 2 --schedule zb-h1 --weight-delays 0,-2",
     "W delays '0,-2': -2 is not from -1 to"},
    {"balance {dir}/ok.json --stages 2 --schedule zb-h1 --weight-delays 0,1,1",
     "3 W delays for 2 stages"},
    {"balance {dir}/ok.json --stages 2 --weight-delays 0,1", "W delays go with zb-h1, not gpipe"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --save {dir}/s.pt",
     "--save writes a TorchScript model back with its trained weights, and mlp:layers=2,width=8 "
     "is a built-in model: train a .pt file"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --schedule zb-h1 "
     "--chunks 2 --weight-delays 0,1,1",
     "3 W delays for 2 stages"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --auto --weight-delays 0,1 "
     "-o {dir}/v",
     "--weight-delays goes without --auto"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --auto --profile-rounds 0 "
     "-o {dir}/v",
     "--profile-rounds must be at least 1, got 0"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --profile-rounds 2 -o {dir}/v",
     "--profile-rounds, --bind-cores and --profile-in-turns go with --auto"},
    {"validate --input-shape 3,x -o {dir}/v",
     "input shape '3,x': expected positive integers separated by commas"},
    {"validate --auto --input-shape 0,4 -o {dir}/v",
     "input shape '0,4': expected positive integers separated by commas"},
    {"demo --input-shape 3,x -o {dir}/v",
     "input shape '3,x': expected positive integers separated by commas"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --bind-cores -o {dir}/v",
     "--profile-rounds, --bind-cores and --profile-in-turns go with --auto"},
    {"validate --plans {dir}/missing.json -o {dir}/v", "{dir}/missing.json"},
    {"validate --plans {dir}/malformed.json -o {dir}/v", "malformed.json"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --plan {dir}/plan_overlap.json",
     "plan_overlap.json: stages[1].first_layer is 0 but the stages before it hold layers 0 to 0"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --plan {dir}/plan_short_names.json",
     "plan_short_names.json: stages[1].layer_names has 1 names for 2 layers"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --plan "
     "{dir}/plan_other_prediction.json",
     "plan_other_prediction.json: prediction.chunks is not the plan's chunks, 4"},
    {"train --model mlp:layers=2,width=8 --plan {dir}/plan_bad_input.json",
     "{dir}/plan_bad_input.json: inputs[0] 'float33[4,8]': unknown dtype 'float33'"},
    {"validate --plans {dir}/plan_bad_input.json -o {dir}/v",
     "{dir}/plan_bad_input.json: inputs[0] 'float33[4,8]': unknown dtype 'float33'"},
    {"train --plan {dir}/plan_unnamed.json",
     "{dir}/plan_unnamed.json does not name its model: give it with --model"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --plan {dir}/plan_balance_twice.json",
     "plan_balance_twice.json: \"balance\" given twice in the document"},
    {"validate --plans {dir}/ok.json -o {dir}/v", "{dir}/ok.json"},  // a profile, not a plan
    {"validate --plans {dir}/ok.json {dir}/../$(basename {dir})/ok.json -o {dir}/v",
     "--plans names {dir}/ok.json twice ({dir}/../"},
    {"validate --plans {dir}/missing.json --stages 2 -o {dir}/v",
     "--plans takes the model and its configuration from the plans: drop --stages"},
    {"validate --plans {dir}/missing.json --steps 0 -o {dir}/v", "--steps must be at least 1"},
    // An empty item of a list: CLI11 drops it unsaid, so 1,,0.5 ran as 1,0.5.
    {"balance {dir}/ok.json --stages 2 --memory-caps ,30K",
     "--memory-caps: an empty item in ',30K' (give the values comma-separated, none empty)"},
    {"balance {dir}/ok.json --stages 3 --device-speeds=1,,0.5",
     "--device-speeds: an empty item in '1,,0.5'"},
    {"profile --model mlp:layers=2,width=8 --chunks 1,2,", "--chunks: an empty item in '1,2,'"},
    {"balance {dir}/ok.json --stages 2 --schedule-plans {dir}/plans --json",
     "--schedule-plans prints the schedule table"},
    {"validate --model mlp:layers=2,width=8 --auto --profile-rounds 3 --profile-repeat 2 -o "
     "{dir}/v",
     "--profile-rounds must be at most --profile-repeat (2): each round times a pass at least, "
     "got 3"},
    {"balance {dir}/ok.json --stages 2 --compare --format pippy",
     "--compare prints tables beside the plan's, not in JSON or Python"},
    {"balance {dir}/ok.json --stages 2 --schedule-plans {dir}/ok.json/plans",
     "--schedule-plans: cannot make the directory"},
    {"balance {dir}/ok.json --stages 2 --schedule-plans {dir}/sp -o {dir}/sp/gpipe.json",
     "-o and --schedule-plans name the same file"},
    {"balance {dir}/ok.json --stages 2 --schedule-plans {dir}/missing/sp",
     "--schedule-plans: cannot make the directory '{dir}/missing/sp'"},
    {"balance {dir}/sized.json --stages 2 --chunks 8", "outside the profiled sizes 4 to 8"},
    {"balance {dir}/more_chunks_than_samples.json --stages 2",
     "more_chunks_than_samples.json: chunks is more than the 1 samples of input_shape"},
    {"balance {dir}/other_micro_batch.json --stages 2",
     "other_micro_batch.json: batch_size is 2, but 8 samples in 2 chunks are micro-batches of 4"},
    {"plan {dir}/ok.json --devices 2", "the profile does not say its mini-batch"},
    {"plan {dir}/sized.json --devices 0", "devices must be from 1 to 4096, got 0"},
    {"plan {dir}/sized.json --devices 2 --min-gain -5", "--min-gain: Value -5 not in range"},
    {"plan {dir}/sized.json --devices 2 --chunks 9",
     "--chunks 9 is more than the mini-batch of 8 samples"},
    {"plan {dir}/sized.json --devices 2 --memory-cap 1", "no configuration fits the memory caps"},
    {"plan {dir}/sized.json --devices 2 --device-speeds 1,1,1",
     "--device-speeds: 3 values for 2 devices"},
    {"profile --model mlp:layers=2,width=8 --input 'float32[4,8'", "expected DTYPE[SHAPE]"},
    {"train --model mlp:layers=2,width=8 --balance 2,1 --steps 1 --steps 2",
     "--steps given 2 times: give it once"},
    // Options that would do nothing: refused, not ignored.
    {"train --model mlp:layers=2,width=8 --balance 2,1 --steps 1 --deferred-batch-norm",
     "--deferred-batch-norm: the model holds no batch norm whose statistics to defer"},
    {"balance {dir}/ok.json --stages 2 --allreduce-bandwidth 1GB/s",
     "--allreduce-bandwidth requires --replicas"},
    {"plan {dir}/sized.json --devices 2 --allreduce-bandwidth 1GB/s",
     "--allreduce-bandwidth requires --data-parallel"},
    {"profile --model mlp:layers=2,width=8 --input-shape 4,8 --skip-linear 7",
     "--skip-linear goes with several --chunks (e.g. --chunks 1,2,4,8): with one size there is "
     "nothing to interpolate"},
    // An output directory given as a link into a missing directory is refused before the work,
    // not after it; a loop of links says so, as a path (not a library's "filesystem error").
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --stages 2 --steps 100000 -o "
     "{dir}/dangling",
     "cannot create '{dir}/dangling': No such file or directory"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --stages 2 -o {dir}/loop",
     "cannot write '{dir}/loop': too many symbolic links"},
    {"report {dir}/loop", "report: '{dir}/loop' is not a directory: Too many levels of symbolic"},
    // CLI11 reads a bracketed value as a list: the user's word, not its first item, is quoted.
    {"profile --model mlp:layers=2,width=8 --input '[4,8]'",
     "--input '[4,8]': the dtype comes first, DTYPE[SHAPE], e.g. float32[4,8]"},
    {"train --model mlp:layers=2,width=8 --input 'float32[4,8]' '[4,8]' --balance 1,2",
     "--input '[4,8]': the dtype comes first"},
    {"train --model mlp:layers=2,width=8 --input='[4,8]' --balance 1,2",
     "--input '[4,8]': the dtype comes first"},
    {"profile --model mlp:layers=2,width=8 --input 'complex64[4,8]'", "unknown dtype 'complex64'"},
    {"profile --model mlp:layers=2,width=8 --input 'int64[4,8]'",
     "an integer input needs its range"},
    {"profile --model gpt:layers=1,dim=8,heads=2,seq=8,vocab=16 --input 'int64[4,8]:2000'",
     "layer 0 ('embed', Embedding) rejected its input: index out of range in self "
     "(an index at or past the size of the layer's table: token ids must be below its "
     "embedding's vocabulary)"},
    {"profile --model mlp:layers=2,width=8 --input 'float32[4,8]:9'",
     "only integer inputs take a range"},
    {"profile --model mlp:layers=2,width=8 --input 'float32[4,8]' --input 'float32[2,8]'",
     "must agree"},
    {"profile --model mlp:layers=2,width=8 --input 'float32[4,8]' --input-shape 4,8",
     "--input-shape excludes --input"},
    {"profile --model mlp:layers=2,width=8 --input-shape 8,8 --chunks 4,5",
     "--chunks 4 and 5 both mean micro-batches of 2 samples"},
    {"train --plan {dir}/plan_chunks_1e20.json --model mlp:layers=2,width=8 --input-shape 4,8",
     "chunks is 1e+20, expected 1 to 1073741824"},
    {"train --plan {dir}/plan_chunks_2.7.json --model mlp:layers=2,width=8 --input-shape 4,8",
     "chunks must be an integer, not 2.7"},
    {"validate --plans {dir}/plan_speed_0.json --profile-in-turns -o {dir}/v",
     "plan_speed_0.json: device 1's speed is 0, expected a relative speed from 1e-6 to 1e6"},
    // Files that are not what they should be.
    {"balance {dir}/fifo --stages 2", "cannot read '{dir}/fifo': not a regular file"},
    {"balance /dev/zero --stages 2", "cannot read '/dev/zero': not a regular file"},
    {"balance {dir}/ok.json --stages 2 -o {dir}/fifo", "it is not a regular file"},
    {"balance {dir}/ok.json --stages 2 -o {dir}", "it is not a regular file"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 -o {dir}/project",
     "holds notes.txt, which this command does not write"},
    {"report {dir}/huge_stage", "timeline[0].stage is 2000000000, expected 0 to 2"},
    {"profile --model mlp:layers=1000000000", "model option layers=1000000000: at most 4096"},
    // Commands.
    {"",
     "give a command (demo, launch, link, models, balance, plan, profile, report, train, validate"},
    {"bogus", "unknown command 'bogus' (commands: demo, launch, link, models,"},
    {"demo --model nosuchmodel", "unknown model 'nosuchmodel'"},
    {"profile --model mlp:layers=2 --bogus", "profile has no option --bogus (see --help)"},
    // A mistyped option is named with the one it most likely meant, even when the one meant was
    // required; train, which has no --stages, says how it is told where to cut.
    {"profile --modle mlp:layers=2", "profile has no option --modle; did you mean --model?"},
    {"train --model mlp:layers=2 --balance 2,1 --chunsk=4",
     "train has no option --chunsk; did you mean --chunks?"},
    {"train --model mlp:layers=2 --stages 2",
     "train has no option --stages: --balance (e.g. 3,2) or --plan says where to cut"},
    {"train --model mlp:layers=2 --balance 2,1 9", "argument was not expected: 9"},
    // An unknown option that is no typo of a missing required one leaves CLI11's words; one
    // given already is not suggested; launch's command needs -- before it.
    {"profile --bogus x", "--model is required"},
    {"train --model mlp:layers=2 --balance 2,1 --balanse 2,1", "train has no option --balanse ("},
    {"launch --nproc-per-node 2 echo --grace 3",
     "launch's --grace comes after the command's first word 'echo', where it is the command's"},
    {"launch --nproc-per-node=2 --master-port 0 echo x --bind-cores",
     "launch's --bind-cores comes after the command's first word 'echo'"},
    {"launch --nproc-per-node 2 true --foo",
     "launch has no option --foo: give the command to run after --, e.g. pipebal launch"},
    {"profile", "--model is required"},
    {"profile --model mlp:layers=2,width=8 --backend cupti", "cupti"},
    {"profile --model mlp:layers=2,width=8 --device tpu", "tpu"},
    {"report /nonexistent/dir", "/nonexistent/dir"},
    {"validate --stages 2 --processes 3 -o {dir}/v",
     "--processes 3: each device (--stages) is one process"},
    {"link", "link measures between two processes: run it as pipebal launch"},
    {"launch --nproc-per-node 0 -- true", "--nproc-per-node must be between 1 and 1024, got 0"},
    {"launch --nproc-per-node 1024 --bind-cores -- true",
     "this launcher may run on cannot give each of 1024 processes one of its own"},
    {"launch --nproc-per-node 2", "give the command to run after --, e.g. pipebal launch"},
    {"launch --nproc-per-node 2 -- /nonexistent/x",
     "cannot run '/nonexistent/x': No such file or directory"},
    // Files that are not files: a FIFO would block the read (a model, data), /dev/zero not end it.
    {"profile --model {dir}/fifo --input-shape 4,8",
     "cannot load TorchScript model '{dir}/fifo': not a regular file"},
    {"train --model mlp:layers=2,width=8 --balance 2,1 --data {dir}/fifo --batch-size 4",
     "cannot read data '{dir}/fifo': not a regular file"},
    {"train --model mlp:layers=2,width=8 --balance 2,1 --data /dev/zero --batch-size 4",
     "cannot read data '/dev/zero': not a regular file"},
    {"train --model mlp:layers=2,width=8 --balance 2,1 --data {dir} --batch-size 4",
     "not a regular file"},
    // Outputs no loss trains on, with synthetic targets.
    {"train --model {fixtures}/rows_doubled_scripted.pt --input-shape 4,8 --balance 1,1",
     "the model's output has 4 rows for 2 samples (shape [4, 8])"},
    {"train --model {fixtures}/first_row_only_scripted.pt --input-shape 4,8 --balance 2,1",
     "the model's output has 1 row for 2 samples (shape [1, 4])"},
    {"train --model {fixtures}/fixed_batch_scripted.pt --input-shape 4,8 --balance 1,2",
     "the model runs on a batch of 4 but not on 2 samples (layer 2 ('2', Linear) rejected its "
     "input: "},
    {"train --model {fixtures}/detached_output_scripted.pt --input-shape 4,8 --balance 1,1",
     "no parameter of the model got a gradient in the first step"},
    {"profile --model {fixtures}/scalar_output_scripted.pt --input-shape 4,8",
     "the model's output is a single number, not one per sample"},
    {"train --model {fixtures}/integer_output_scripted.pt --input-shape 4,8 --balance 1,1",
     "the model's output is Long, not floating point"},
    {"launch --nnodes 2 --master-port 0 -- true", "--master-port 0 (any free port) works on one"},
    {"launch --node-rank 3 -- true", "--node-rank must be between 0 and 0 (--nnodes 1), got 3"},
    // Numbers read one way by every option (tools/value_syntax.h): base 10, no wrap, finite.
    {"balance {dir}/ok.json --stages 2 --chunks 0x10",
     "--chunks: expected a whole number in base 10, got '0x10'"},
    {"balance {dir}/ok.json --stages 2 --chunks 99999999999999999999",
     "99999999999999999999 is out of range"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --steps 99999999999",
     "--steps 99999999999: too large for this option"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --seed -1",
     "--seed: must not be negative, got -1"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --lr nan",
     "--lr: expected a decimal number, got 'nan'"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --lr 1e400",
     "--lr: 1e400 is too large"},
    {"plan {dir}/sized.json --devices 2 --min-gain nan", "expected a decimal number, got 'nan'"},
    {"balance {dir}/ok.json --stages 2 -o ''", "--output: the value is empty"},
    // Flags that would do nothing, refused rather than ignored.
    {"balance {dir}/ok.json --stages 2 --json --format pippy", "--json excludes --format"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --epochs 3",
     "--epochs requires --data"},
    {"train --model mlp:layers=2,width=8 --balance 2,1 --data {dir}/ok.json --steps 3",
     "--steps excludes --data"},
    // Time limits past any step, which as clock deadlines would overflow and fire at once.
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --timeout 1e10",
     "--timeout must be from 0 to 1000000 seconds (0: none), got 10000000000"},
    // A positive limit too small to be meant: 1e-310, subnormal, compared as 0 (no limit) once
    // subnormals were flushed.
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --timeout 1e-310",
     "--timeout must be 0 (none) or at least a millisecond, got a subnormal number"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --timeout 1e-9",
     "--timeout must be 0 (none) or at least a millisecond, got 1e-09"},
    {"launch --grace 1e10 -- true", "--grace must be from 0 to 1000000 seconds, got 10000000000"},
    {"launch --grace 1000001 -- true", "--grace must be from 0 to 1000000 seconds, got 1000001"},
    {"launch --fold-within 61 -- true",
     "--fold-within must be from 0 to 60 seconds (0: the processes write to standard error "
     "themselves), got 61"},
    {"launch --fold-within -1 -- true", "--fold-within must be from 0 to 60 seconds"},
    {"profile --model mlp:layers=2,width=8 --time-budget 1e10",
     "the time budget must be from 0 to 1000000 seconds"},
    // An option given no value before the next option: CLI11 would take that option as its value.
    {"validate --plans -o {dir}/v", "--plans: no value given (-o is an option)"},
    {"balance {dir}/ok.json --memory-caps --stages=2",
     "--memory-caps: no value given (--stages=2 is an option)"},
    {"profile --model --input-shape 4,8", "--model: no value given (--input-shape is an option)"},
    {"profile --model mlp:layers=2,width=8 --timeout -1",
     "--timeout must be from 0 to 1000000 seconds (0: no limit), got -1"},
    {"profile --model mlp:layers=2,width=8 --co-runners 5000",
     "co-runners must be from 0 to 511, got 5000"},
    {"train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 2,1 --steps 2147483647",
     "--steps must be from 1 to 10000000, got 2147483647"},
    {"balance {dir}/ok.json --stages 1073741825 --schedule interleaved --virtual 4",
     "--stages must be from 1 to 262144, got 1073741825"},
    // validate refuses these before it profiles: the one line is all it prints.
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --stages 100000 -o {dir}/v",
     "--stages must be from 1 to 512, got 100000"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --steps 0 -o {dir}/v",
     "--steps must be from 1 to 10000000, got 0"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --warmup-steps -1 -o {dir}/v",
     "--warmup-steps must be from 0 to 10000000, got -1"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --timeout 1e7 -o {dir}/v",
     "--timeout must be from 0 to 1000000 seconds"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --threads 100000 -o {dir}/v",
     "threads per stage must be between 1 and the"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --auto --steps 0 -o {dir}/v",
     "--steps must be from 1 to 10000000, got 0"},
    {"validate --model mlp:layers=2,width=8 --input-shape 4,8 --auto --threads 100000 -o {dir}/v",
     "threads per stage must be between 1 and the"},
};

TEST(BadInput, EveryRowIsOneClearLineAndExitStatusTwo) {
  const std::string dir = scratch_dir();
  write_inputs(dir);
  for (const BadInput& row : kTable) {
    const std::string args = expand(row.args, dir);
    const CliResult r = run_pipebal(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("pipebal: error: ", 0), 0u) << args << ": " << r.err;
    EXPECT_NE(r.err.find(expand(row.fragment, dir)), std::string::npos)
        << args << "\nexpected: " << row.fragment << "\ngot: " << r.err;
  }
}

// An OMP_NUM_THREADS that LibTorch's OpenMP runtime would warn about (LibTorch adds a stack
// trace) and replace by a count of its own is one line before LibTorch loads; --help still works.
TEST(BadInput, AnOpenMpThreadCountItCannotTakeIsOneLine) {
  const std::string dir = scratch_dir();
  const std::string train = std::string(PIPEBAL_BINARY) +
                            " train --model mlp:layers=2,width=8 --input-shape 4,8 --balance 1,2 "
                            "--steps 1 --warmup-steps 0 -q -o " +
                            dir + "/run.json";
  for (const char* value : {"abc", "0", "-1", "4,", "", "99999999999", "1e2"}) {
    const CliResult r = run_shell(fmt::format("env OMP_NUM_THREADS='{}' {}", value, train));
    EXPECT_EQ(r.status, 2) << value << ": " << r.err;
    EXPECT_EQ(r.err, fmt::format("pipebal: error: OMP_NUM_THREADS='{}' is not a number of "
                                 "threads: give a positive integer, e.g. OMP_NUM_THREADS=4, or "
                                 "unset it\n",
                                 value));
    EXPECT_FALSE(std::filesystem::exists(dir + "/run.json")) << value;
  }
  for (const char* value : {"1", " 2 ", "+2", "2,1", "2\r", "1,3000000000"}) {
    const CliResult r = run_shell(fmt::format("env OMP_NUM_THREADS='{}' {}", value, train));
    EXPECT_EQ(r.status, 0) << value << ": " << r.err;
    EXPECT_EQ(r.err, "") << value;
  }
  const CliResult help =
      run_shell("env OMP_NUM_THREADS=abc " + std::string(PIPEBAL_BINARY) + " train --help");
  EXPECT_EQ(help.status, 0) << help.err;
  EXPECT_NE(help.out.find("Usage:"), std::string::npos) << help.out;
  // LibTorch reads MKL_NUM_THREADS as well, and says the same of a value it cannot take.
  for (const char* value : {"abc", "0"}) {
    const CliResult r = run_shell(fmt::format("env MKL_NUM_THREADS='{}' {}", value, train));
    EXPECT_EQ(r.status, 2) << value << ": " << r.err;
    EXPECT_EQ(r.err, fmt::format("pipebal: error: MKL_NUM_THREADS='{}' is not a number of "
                                 "threads: give a positive integer, e.g. MKL_NUM_THREADS=4, or "
                                 "unset it\n",
                                 value));
  }
  const CliResult mkl = run_shell("env MKL_NUM_THREADS=1 " + train);
  EXPECT_EQ(mkl.status, 0) << mkl.err;
  EXPECT_EQ(mkl.err, "");
}

// More OpenMP threads than the machine has cores is the user's choice for the layers; the
// profile's own calibration of the engine (pipelines, which refuse more threads per stage than
// cores) stays within the cores rather than failing after every layer was profiled.
TEST(BadInput, AnOpenMpThreadCountAboveTheCoresStillProfiles) {
  const std::string dir = scratch_dir();
  const CliResult r = run_shell(fmt::format(
      "env OMP_NUM_THREADS={} {} profile --model mlp:layers=2,width=8 --input-shape 4,8 "
      "--chunks 1 --repeat 3 -q -o {}/profile.json",
      pipebal::usable_cores() + 2, PIPEBAL_BINARY, dir));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("error"), std::string::npos) << r.err;
  const nlohmann::json profile = nlohmann::json::parse(read_text(dir + "/profile.json"));
  EXPECT_EQ(profile["environment"]["intra_op_threads"], pipebal::usable_cores() + 2);
  // The engine was calibrated (its costs are differences of timings, 0 where noise hides them).
  ASSERT_TRUE(profile.contains("engine")) << profile.dump();
  for (const char* key : {"step_ms", "action_ms", "handoff_ms"}) {
    EXPECT_GE(profile["engine"][key].get<double>(), 0) << key;
  }
}

// A balance that fails leaves no --schedule-plans directory it made (one made before is kept).
TEST(BadInput, AFailedBalanceLeavesNoScheduleDirectoryItMade) {
  const std::string dir = scratch_dir();
  write_inputs(dir);
  std::filesystem::create_directory(dir + "/kept");
  for (const char* plans : {"/made", "/kept"}) {
    for (const char* options : {"--stages 0", "--stages 2 --memory-cap 1"}) {
      const CliResult r = run_pipebal(
          fmt::format("balance {0}/ok.json {1} --schedule-plans {0}{2}", dir, options, plans));
      EXPECT_EQ(r.status, 2) << options << ": " << r.err;
      EXPECT_EQ(std::filesystem::exists(dir + plans), std::string(plans) == "/kept") << plans;
    }
  }
}

}  // namespace
}  // namespace pipebal::testing
