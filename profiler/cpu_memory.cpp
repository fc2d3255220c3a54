// See cpu_memory.h.
#include "pipebal/profiler/cpu_memory.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

namespace pipebal::profiler {
namespace {

thread_local int thread_tag = -1;

// Wraps the allocator that was current when the first scope started. A counted allocation keeps
// its data pointer as its context (context == data), so LibTorch's raw interface keeps working:
// oneDNN allocates through raw_allocate/raw_deallocate, which require exactly that. The inner
// DataPtr is parked in a table keyed by the data pointer until the block is freed.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  static CountingCpuAllocator& instance() {
    // Leaked on purpose: see the header. Constructed on first use, thread-safe.
    static CountingCpuAllocator* const owner = new CountingCpuAllocator();
    return *owner;
  }

  // LibTorch 2.3 made allocate() non-const and added copy_data(); 1.13 has the const allocate()
  // and no copy_data(). Both overloads are defined, each overriding in one of the versions, so
  // neither can be marked `override`.
  c10::DataPtr allocate(size_t bytes) const { return counted_allocate(bytes); }
  c10::DataPtr allocate(size_t bytes) { return counted_allocate(bytes); }
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counted_delete; }

  // Called under scope_mutex() only.
  void install() {
    c10::Allocator* current = c10::GetCPUAllocator();
    if (current == this) return;
    inner_.store(current);
    // Priority 0 replaces the default allocator (registered at 0) and lets us restore it.
    c10::SetCPUAllocator(this, /*priority=*/0);
    if (c10::GetCPUAllocator() != this) {
      throw std::runtime_error(
          "cannot count CPU memory: another CPU allocator was registered with a higher c10 "
          "priority, so the profiler's counting allocator cannot be installed");
    }
    previous_ = current;
  }

  void uninstall() {
    if (previous_ != nullptr && c10::GetCPUAllocator() == this) {
      c10::SetCPUAllocator(previous_, /*priority=*/0);
    }
    previous_ = nullptr;
  }

  int64_t current_bytes() const { return total_.current.load(); }
  int64_t peak_bytes() const { return total_.peak.load(); }
  void reset_peak() {
    total_.reset_peak();
    for (auto& tag : tags_) tag.reset_peak();
  }
  int64_t current_bytes(int tag) const { return tags_.at(tag).current.load(); }
  void count(int tag, int64_t bytes) const { add(tag, bytes); }
  int64_t peak_bytes(int tag) const { return tags_.at(tag).peak.load(); }

  void hand_over(const void* data, int tag) {
    void* key = const_cast<void*>(data);
    Shard& shard = shard_of(key);
    std::lock_guard<std::mutex> lock(shard.mutex);
    const auto it = shard.blocks.find(key);
    if (it == shard.blocks.end() || it->second.tag == tag) return;
    Block& block = it->second;  // the total stays as it is
    if (tag >= 0) tags_[tag].add(block.bytes);
    if (block.tag >= 0) tags_[block.tag].add(-block.bytes);
    block.tag = tag;
  }

 private:
  struct Block {
    c10::DataPtr inner;
    int64_t bytes = 0;
    int tag = -1;
  };

  // Lock-free current and peak bytes: every value `current` takes is seen by the thread that
  // produced it, which raises `peak` to it, so the peak is exact.
  struct Counter {
    std::atomic<int64_t> current{0};
    std::atomic<int64_t> peak{0};
    void add(int64_t bytes) {
      const int64_t now = current.fetch_add(bytes) + bytes;
      int64_t seen = peak.load();
      while (now > seen && !peak.compare_exchange_weak(seen, now)) {
      }
    }
    void reset_peak() { peak.store(current.load()); }
  };

  // The table of live blocks, split by address so that threads allocating at the same time
  // rarely wait for each other (one lock for all made concurrent pipeline stages queue on it).
  struct Shard {
    std::mutex mutex;
    std::unordered_map<void*, Block> blocks;
  };
  static constexpr size_t kShards = 64;
  Shard& shard_of(void* data) const {
    const auto address = reinterpret_cast<uintptr_t>(data);
    return shards_[(address >> 6 ^ address >> 16) % kShards];
  }

  void add(int tag, int64_t bytes) const {
    total_.add(bytes);
    if (tag >= 0) tags_[tag].add(bytes);
  }

  CountingCpuAllocator() = default;

  c10::DataPtr counted_allocate(size_t bytes) const {
    c10::DataPtr block = inner_.load()->allocate(bytes);
    void* data = block.get();
    // Empty allocations carry no data pointer to key on, and no bytes to count.
    if (data == nullptr) return block;
    const c10::Device device = block.device();
    Shard& shard = shard_of(data);
    std::lock_guard<std::mutex> lock(shard.mutex);
    Block& slot = shard.blocks[data];
    if (slot.inner) {
      // A block handed out through raw_allocate() and freed with the raw deleter of the
      // allocator that was current by then, bypassing us; the address is being reused now.
      // It was freed already, so forget it without running its deleter again.
      add(slot.tag, -slot.bytes);
      slot.inner.release_context();
    }
    slot = Block{std::move(block), static_cast<int64_t>(bytes), thread_tag};
    add(slot.tag, slot.bytes);
    return c10::DataPtr(data, data, &counted_delete, device);
  }

  static void counted_delete(void* data) { instance().release(data); }

  void release(void* data) {
    c10::DataPtr inner;  // destroyed after the lock is released: freeing may take time
    bool ours = false;
    {
      Shard& shard = shard_of(data);
      std::lock_guard<std::mutex> lock(shard.mutex);
      const auto it = shard.blocks.find(data);
      if (it != shard.blocks.end()) {
        add(it->second.tag, -it->second.bytes);
        inner = std::move(it->second.inner);
        shard.blocks.erase(it);
        ours = true;
      }
    }
    // raw_deallocate() of a block that the wrapped allocator handed out before the scope
    // started: it is not ours, so its own allocator frees it.
    c10::Allocator* fallback = inner_.load();
    if (!ours && fallback != nullptr && fallback->raw_deleter() != nullptr)
      fallback->raw_deleter()(data);
  }

  // Bookkeeping changes inside allocate(), which LibTorch 1.13 declares const.
  std::atomic<c10::Allocator*> inner_{nullptr};
  mutable Counter total_;
  mutable std::array<Counter, CpuMemoryScope::kMaxTags> tags_;
  mutable std::array<Shard, kShards> shards_;
  c10::Allocator* previous_ = nullptr;  // only touched under scope_mutex()
};

// Serialises installing and restoring; `depth` counts the live scopes.
std::mutex& scope_mutex() {
  static std::mutex mutex;
  return mutex;
}
int scope_depth = 0;                 // guarded by scope_mutex()
std::atomic<bool> any_scope{false};  // scope_depth > 0, readable without the lock

}  // namespace

CpuMemoryScope::CpuMemoryScope() {
  std::lock_guard<std::mutex> lock(scope_mutex());
  if (scope_depth == 0) CountingCpuAllocator::instance().install();
  ++scope_depth;
  any_scope.store(true);
}

CpuMemoryScope::~CpuMemoryScope() {
  std::lock_guard<std::mutex> lock(scope_mutex());
  if (--scope_depth == 0) {
    CountingCpuAllocator::instance().uninstall();
    any_scope.store(false);
  }
}

int64_t CpuMemoryScope::current_bytes() const {
  return CountingCpuAllocator::instance().current_bytes();
}

int64_t CpuMemoryScope::peak_bytes() const {
  return CountingCpuAllocator::instance().peak_bytes();
}

void CpuMemoryScope::reset_peak() {
  CountingCpuAllocator::instance().reset_peak();
}

std::function<void()> CpuMemoryScope::count_held(int64_t bytes) {
  const int tag = thread_tag;
  CountingCpuAllocator::instance().count(tag, bytes);
  return [tag, bytes] { CountingCpuAllocator::instance().count(tag, -bytes); };
}

void CpuMemoryScope::hand_over(const void* data) {
  CountingCpuAllocator::instance().hand_over(data, thread_tag);
}

bool CpuMemoryScope::counting() {
  return any_scope.load();
}

void CpuMemoryScope::set_thread_tag(int tag) {
  if (tag < -1 || tag >= kMaxTags) {
    throw std::invalid_argument("memory tag " + std::to_string(tag) + " out of range [-1, " +
                                std::to_string(kMaxTags) + ")");
  }
  thread_tag = tag;
}

int64_t CpuMemoryScope::current_bytes(int tag) const {
  return CountingCpuAllocator::instance().current_bytes(tag);
}

int64_t CpuMemoryScope::peak_bytes(int tag) const {
  return CountingCpuAllocator::instance().peak_bytes(tag);
}

}  // namespace pipebal::profiler
