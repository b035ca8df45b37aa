// The service classes of ferry.hpp (Server, Request, Client, Response), compiled and run by
// tests/examples.rs: a server on a thread answers at once (an echo of the request's own bytes),
// later by client and request id, and smaller after an answer too large; a second server is
// refused; a server destroyed with a call pending ends it with FERRY_SERVER_GONE; then there is
// no server. Every wait has a timeout. Prints one line and exits 0 when all held; the domain is
// $FERRY_DOMAIN.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "check.hpp"
#include "ferry.hpp"

using namespace std::chrono_literals;

namespace {

constexpr auto kLong = 20s;

bool equals(ferry::bytes_view bytes, const char *text) {
    return bytes.size() == std::strlen(text) && std::memcmp(bytes.data(), text, bytes.size()) == 0;
}

// Runs `call`, which must throw ferry::error with `status`.
template <typename F>
void throws(ferry_status status, F call) {
    try {
        call();
    } catch (const ferry::error &e) {
        if (e.status() != status) {
            std::fprintf(stderr, "hpp_services: expected %s, got %s\n", ferry_status_name(status),
                         e.what());
            std::exit(1);
        }
        return;
    }
    std::fprintf(stderr, "hpp_services: expected %s, nothing thrown\n", ferry_status_name(status));
    std::exit(1);
}

void serve(std::optional<ferry::Server> &server) {
    // 1. An echo, from the request's own bytes.
    std::optional<ferry::Request> r = server->recv(kLong);
    CHECK(r && equals(r->data(), "ping") && r->id() == 0 && r->client() != 0);
    CHECK(r->respond(r->data()) == ferry::Responded::Sent);
    CHECK(r->get() == nullptr && r->size() == 0);
    // While a request is held, the server refuses another receive.
    r = server->recv(kLong);
    CHECK(r && equals(r->data(), "second"));
    throws(FERRY_INVALID_ARGUMENT, [&] { server->try_recv(); });
    // 2. Released (by the destructor), answered later by client and id.
    uint64_t client = r->client(), id = r->id();
    r.reset();
    CHECK(server->respond(client, id, "later", 5) == ferry::Responded::Sent);
    throws(FERRY_INVALID_ARGUMENT, [&] { (void)server->respond(client, id, "again", 5); });
    // 3. Too large, the request ended but kept: answered smaller.
    r = server->recv(kLong);
    CHECK(r && equals(r->data(), "third"));
    client = r->client();
    id = r->id();
    std::vector<uint8_t> big(1025, 7);
    throws(FERRY_TOO_LARGE, [&] { (void)r->respond(big.data(), big.size()); });
    CHECK(r->get() == nullptr);
    CHECK(server->respond(client, id, "small", 5) == ferry::Responded::Sent);
    // 4. Taken, never answered: the server goes with the call pending.
    r = server->recv(kLong);
    CHECK(r && equals(r->data(), "fourth"));
    r.reset();
    server.reset();
}

}  // namespace

int main() {
    try {
        ferry::Node node("hpp-services");
        ferry::Qos qos = ferry::Qos().transport(ferry::Transport::Shm).max_message_size(1024);
        std::optional<ferry::Server> server(node.server("hpp", qos));
        throws(FERRY_SERVICE_TAKEN, [&] { node.server("hpp", qos); });
        ferry::Client client = node.client("hpp", qos);
        client.wait_for_server(kLong);
        std::thread serving([&] {
            try {
                serve(server);
            } catch (const ferry::error &e) {
                std::fprintf(stderr, "hpp_services: server: %s\n", e.what());
                std::exit(1);
            }
        });

        ferry::Response a = client.call("ping", 4, kLong);
        CHECK(equals(a.data(), "ping") && a.request_id() == 0);
        // While a response is held, the client refuses another call.
        throws(FERRY_INVALID_ARGUMENT, [&] { client.call("x", 1, kLong); });
        a.release();
        CHECK(a.get() == nullptr && a.size() == 0);
        uint64_t id = client.send("second", 6);
        CHECK(id == 1 && client.pending() == 1);
        std::optional<ferry::Response> b = client.recv(kLong);
        CHECK(b && b->request_id() == id && equals(b->data(), "later"));
        b.reset();
        CHECK(equals(client.call("third", 5, kLong).data(), "small"));
        CHECK(!client.failed_request());
        throws(FERRY_SERVER_GONE, [&] { client.call("fourth", 6, kLong); });
        CHECK(client.failed_request() == std::optional<uint64_t>(3));
        serving.join();
        CHECK(client.pending() == 0 && !client.has_server());
        CHECK(!client.try_recv());
        client.wait_for_server(0s);
        throws(FERRY_NO_SERVER, [&] { client.send("fifth", 5); });
    } catch (const ferry::error &e) {
        std::fprintf(stderr, "hpp_services: %s\n", e.what());
        return 1;
    }
    std::printf("the C++ service classes work\n");
    return 0;
}
