/*
 * pubsub.cpp: a publisher and a subscriber talking over shared memory, then over UDP, through
 * ferry's C++17 header. The publisher writes each message in place (a loan); the subscriber
 * reads it in place and checks every byte, and keeps it (Subscriber::keep) until the next one
 * has come, when it checks it again beside it.
 *
 * Build (from the repository root, after `cargo build --release -p ferry-c`):
 *   c++ -std=c++17 -O2 -Icrates/ferry-c/include examples/cpp/pubsub.cpp \
 *       -Ltarget/release -lferry_c -Wl,-rpath,"$PWD/target/release" -o pubsub
 * Run:
 *   ./pubsub [COUNT [SIZE]]   (100 messages of 4096 bytes; the domain is $FERRY_DOMAIN)
 */
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "ferry.hpp"

namespace {

using namespace std::chrono_literals;

// Byte i of message seq.
uint8_t pattern(uint64_t seq, std::size_t i) { return static_cast<uint8_t>(seq * 31 + i); }

// Sends `count` messages of `size` bytes over `transport` and receives them; false on the
// first message that did not arrive intact.
bool exchange(ferry::Transport transport, const char *name, uint64_t count, std::size_t size) {
    ferry::Node node("cpp-pubsub");
    ferry::Qos qos = ferry::Qos().transport(transport).max_message_size(size);
    std::string topic = std::string("cpp-pubsub-") + name;
    ferry::Subscriber sub = node.subscriber(topic, qos);
    ferry::Publisher pub = node.publisher(topic, qos);

    // Wait until the publisher serves the subscriber (which attaches when it looks).
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (pub.subscriber_count() == 0) {
        sub.publisher_count();
        if (std::chrono::steady_clock::now() > deadline) {
            std::fprintf(stderr, "%s: the subscriber never attached\n", name);
            return false;
        }
        std::this_thread::sleep_for(1ms);
    }

    // The message before, kept past the next receive (at most ferry_qos.max_held, 2 by
    // default, are held at once: it and the one just received).
    std::optional<ferry::Kept> previous;
    auto intact = [size](ferry::bytes_view in, uint64_t seq) {
        bool ok = in.size() == size;
        for (std::size_t i = 0; ok && i < in.size(); i++) ok = in[i] == pattern(seq, i);
        return ok;
    };
    for (uint64_t seq = 0; seq < count; seq++) {
        ferry::Loan loan = pub.loan(size);
        ferry::mutable_bytes_view out = loan.data();
        for (std::size_t i = 0; i < out.size(); i++) out[i] = pattern(seq, i);
        loan.send();

        std::optional<ferry::Sample> sample = sub.recv(5s);
        if (!sample) {
            std::fprintf(stderr, "%s: message %llu did not arrive within 5 s\n", name,
                         static_cast<unsigned long long>(seq));
            return false;
        }
        ferry::bytes_view in = sample->data();
        if (sample->seq() != seq || !intact(in, seq)) {
            std::fprintf(stderr, "%s: message %llu arrived damaged (seq %llu, %zu bytes)\n", name,
                         static_cast<unsigned long long>(seq),
                         static_cast<unsigned long long>(sample->seq()), in.size());
            return false;
        }
        if (previous && (previous->seq() != seq - 1 || !intact(previous->data(), seq - 1))) {
            std::fprintf(stderr, "%s: message %llu changed while it was kept\n", name,
                         static_cast<unsigned long long>(seq - 1));
            return false;
        }
        previous.reset();  // let go of it, then keep this one
        previous = sub.keep(*sample);
    }
    previous.reset();
    std::printf("%s: %llu messages of %zu bytes, every byte as sent, and as kept\n", name,
                static_cast<unsigned long long>(count), size);
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    uint64_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100;
    std::size_t size = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 4096;
    try {
        bool ok = exchange(ferry::Transport::Shm, "shm", count, size) &&
                  exchange(ferry::Transport::Udp, "udp", count, size);
        return ok ? 0 : 1;
    } catch (const ferry::error &e) {
        std::fprintf(stderr, "pubsub: %s\n", e.what());
        return 1;
    }
}
