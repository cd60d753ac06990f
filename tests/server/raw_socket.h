#pragma once
// Plain loopback sockets for tests that need what curl cannot do: hold many connections, send
// half a request, trickle bytes, watch many responses at once.
// Free functions; no shared state.
#include <cstdint>
#include <string_view>

namespace vela::test {

int connect_loopback(uint16_t port);           // a blocking connection, or -1
bool send_all(int fd, std::string_view data);  // false when the peer is gone
// True when the peer closed the connection (EOF or reset) within timeout_ms.
bool closed_by_peer(int fd, int timeout_ms);

}  // namespace vela::test
