// Room in the process's address space for what LibTorch's BLAS maps as it runs. OpenBLAS maps a
// 128 MiB buffer for each thread that runs a matrix product, and when an address-space limit
// (ulimit -v) refuses one it retries forever: the command would hang in its first layer.
#pragma once

#include <cstdint>

namespace pipebal {

// The bytes the process maps now (/proc/self/status's VmSize); 0 when it cannot be read.
int64_t mapped_bytes();

// The bytes OpenBLAS maps for `threads` threads running matrix products.
int64_t blas_buffer_bytes(int threads);

// Throws std::invalid_argument, in one line naming the limit and what to raise it to, when the
// address-space limit leaves less than blas_buffer_bytes(threads) beyond what the process maps
// now. Nothing to check without a limit, or without OpenBLAS loaded (LibTorch with MKL).
void check_address_space_room(int threads);

}  // namespace pipebal
