// The C++ WaitSet of ferry.hpp, compiled and run by tests/examples.rs: one thread waits on two
// subscribers, a server and a client at once. Nothing ready: the wait times out with none. A
// message on the second topic: only it is ready, and stays ready until received. A request:
// the server is ready; its answer: the client is. Two at once: both reported, in the order
// added. A sample held while waiting is an error. Every wait has a timeout. Prints one line and
// exits 0 when all held; the domain is $FERRY_DOMAIN.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <vector>

#include "check.hpp"
#include "ferry.hpp"

using namespace std::chrono_literals;

namespace {

constexpr auto kLong = 20s;

bool is(const std::vector<std::size_t> &ready, std::vector<std::size_t> want) {
    return ready == want;
}

}  // namespace

int main() {
    try {
        ferry::Node node("hpp-waitset");
        ferry::Qos qos = ferry::Qos().transport(ferry::Transport::Shm).max_message_size(1024);
        ferry::Publisher pa = node.publisher("ws/a", qos);
        ferry::Publisher pb = node.publisher("ws/b", qos);
        ferry::Subscriber a = node.subscriber("ws/a", qos);
        ferry::Subscriber b = node.subscriber("ws/b", qos);
        ferry::Server server = node.server("ws/svc", qos);
        ferry::Client client = node.client("ws/svc", qos);
        client.wait_for_server(kLong);

        ferry::WaitSet set;
        CHECK(set.add(a) == 0 && set.add(b) == 1);
        CHECK(set.add(server) == 2 && set.add(client) == 3 && set.size() == 4);

        // Nothing sent: none ready, after the timeout.
        auto start = std::chrono::steady_clock::now();
        CHECK(set.wait(20ms).empty());
        CHECK(std::chrono::steady_clock::now() - start >= 20ms);

        // A message on b: b alone, until it is received.
        pb.send("hello b", 7);
        CHECK(is(set.wait(kLong), {1}));
        CHECK(is(set.wait(0ms), {1}));
        {
            std::optional<ferry::Sample> s = b.try_recv();
            CHECK(s && s->size() == 7);
            // A sample held: waiting on its subscriber is refused.
            bool refused = false;
            try {
                set.wait(0ms);
            } catch (const ferry::error &e) {
                refused = e.status() == FERRY_INVALID_ARGUMENT;
            }
            CHECK(refused);
        }
        CHECK(set.wait(0ms).empty());

        // A request: the server; its answer: the client.
        uint64_t id = client.send("ask", 3);
        CHECK(is(set.wait(kLong), {2}));
        std::optional<ferry::Request> r = server.try_recv();
        CHECK(r && r->id() == id);
        CHECK(r->respond("answer", 6) == ferry::Responded::Sent);
        CHECK(is(set.wait(kLong), {3}));
        std::optional<ferry::Response> got = client.try_recv();
        CHECK(got && got->request_id() == id && got->size() == 6);
        got.reset();

        // Two at once: both, in the order added.
        pa.send("x", 1);
        pb.send("y", 1);
        auto both = set.wait(kLong);
        for (int i = 0; i < 100 && both.size() < 2; ++i) both = set.wait(kLong);
        CHECK(is(both, {0, 1}));
        CHECK(a.try_recv() && b.try_recv());
        CHECK(set.wait(0ms).empty());
    } catch (const ferry::error &e) {
        std::fprintf(stderr, "hpp_waitset: %s\n", e.what());
        return 1;
    }
    std::printf("the C++ wait set works\n");
    return 0;
}
