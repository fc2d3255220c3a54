// Loopback ports for tests of the rendezvous: one held busy by a listening socket, or one that
// was free a moment ago (for a store a test's own ranks serve).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace pipebal::testing {

// A listening socket on a free loopback port, for the length of a test.
struct BusyPort {
  int fd = -1;
  int port = 0;
  BusyPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(listen(fd, 1), 0);
    getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  }
  ~BusyPort() { close(fd); }
  BusyPort(const BusyPort&) = delete;
  BusyPort& operator=(const BusyPort&) = delete;
};

// A loopback port nobody served a moment ago.
inline int free_loopback_port() {
  const BusyPort closed;
  return closed.port;
}

}  // namespace pipebal::testing
