// The allocator pipebal's programs run on: jemalloc where the build found it (tests link
// pipebal_jemalloc as the programs do), and keep_freed_memory_in_process's setting under it.
#include "pipebal/workflow/malloc_tuning.h"

#include <dlfcn.h>
#include <sys/types.h>

#include <gtest/gtest.h>

namespace pipebal::workflow {
namespace {

using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);

ssize_t read_decay(Mallctl mallctl, const char* name) {
  ssize_t value = 0;
  size_t size = sizeof(value);
  EXPECT_EQ(mallctl(name, &value, &size, nullptr, 0), 0) << name;
  return value;
}

void write_decay(Mallctl mallctl, const char* name, ssize_t value) {
  EXPECT_EQ(mallctl(name, nullptr, nullptr, &value, sizeof(value)), 0) << name;
}

TEST(MallocTuning, ThisProgramAllocatesWithWhatTheBuildFound) {
#ifdef PIPEBAL_WITH_JEMALLOC
  EXPECT_TRUE(jemalloc_serves_this_process());
#else
  EXPECT_FALSE(jemalloc_serves_this_process());
#endif
}

// A program that runs on jemalloc without pipebal's start-up settings (a user's, linking or
// preloading it) keeps freed pages once it asks: the decay goes to "never" for the arenas that
// exist and for those made later.
TEST(MallocTuning, UnderJemallocFreedPagesAreKept) {
  const auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl == nullptr) GTEST_SKIP() << "not running on jemalloc";
  for (const char* name : {"arena.0.dirty_decay_ms", "arena.0.muzzy_decay_ms",
                           "arenas.dirty_decay_ms", "arenas.muzzy_decay_ms"}) {
    write_decay(mallctl, name, 10000);  // jemalloc's default
    ASSERT_EQ(read_decay(mallctl, name), 10000) << name;
  }
  keep_freed_memory_in_process();
  for (const char* name : {"arena.0.dirty_decay_ms", "arena.0.muzzy_decay_ms",
                           "arenas.dirty_decay_ms", "arenas.muzzy_decay_ms"}) {
    EXPECT_EQ(read_decay(mallctl, name), -1) << name;
  }
}

}  // namespace
}  // namespace pipebal::workflow
