// The allocator pipebal's programs run on: jemalloc where the build found it (tests link
// pipebal_jemalloc as the programs do), and keep_freed_memory_in_process's setting under it.
#include "pipebal/workflow/malloc_tuning.h"

#include <sys/types.h>

#include <gtest/gtest.h>

#include "pipebal/common/jemalloc_control.h"

namespace pipebal::workflow {
namespace {

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
  EXPECT_NE(jemalloc_mallctl(), nullptr);
#else
  EXPECT_EQ(jemalloc_mallctl(), nullptr);
#endif
}

// A program that runs on jemalloc without pipebal's start-up settings (a user's, linking or
// preloading it) keeps freed pages once it asks: the decay goes to "never" for the arenas that
// exist and for those made later.
TEST(MallocTuning, UnderJemallocFreedPagesAreKept) {
  const Mallctl mallctl = jemalloc_mallctl();
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
