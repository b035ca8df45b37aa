/*
 * service_client.cpp: a client of a service, through ferry's C++17 header, for the server of
 * examples/c/service_server.c. It sends COUNT requests of SIZE bytes (at least 8: the sequence
 * number, u64 little endian, then a pattern) and checks every byte of every answer: an echo
 * when seq % 3 == 1, every byte inverted otherwise. The first half are calls (send and wait);
 * the second half go 8 at a time without waiting (send, send, ..., then receive), their
 * answers matched to them by request id, whatever order they come in.
 *
 * Build (from the repository root, after `cargo build --release -p ferry-c`):
 *   c++ -std=c++17 -O2 -Icrates/ferry-c/include examples/cpp/service_client.cpp \
 *       -Ltarget/release -lferry_c -Wl,-rpath,"$PWD/target/release" -o service_client
 * Run:
 *   ./service_server demo-service shm 100 & ./service_client demo-service shm 100 4096
 *
 * Usage: service_client [SERVICE [shm|udp|auto [COUNT [SIZE]]]]   (demo-service auto 100 4096)
 * Waits up to 10 s for the server to appear. Exits 0 when every answer was as expected, 1
 * otherwise. The domain is $FERRY_DOMAIN, else "default".
 */
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "ferry.hpp"

namespace {

using namespace std::chrono_literals;

constexpr auto kTimeout = 10s;
constexpr std::size_t kInFlight = 8;

// Request seq: its number (u64 little endian), then byte i is seq * 31 + i.
std::vector<uint8_t> request(uint64_t seq, std::size_t size) {
    std::vector<uint8_t> body(size);
    for (std::size_t i = 0; i < size; i++) body[i] = static_cast<uint8_t>(seq * 31 + i);
    for (std::size_t i = 0; i < 8; i++) body[i] = static_cast<uint8_t>(seq >> (8 * i));
    return body;
}

// Whether `answer` is the server's answer to request seq.
bool as_expected(uint64_t seq, std::size_t size, ferry::bytes_view answer) {
    std::vector<uint8_t> body = request(seq, size);
    if (answer.size() != size) return false;
    for (std::size_t i = 0; i < size; i++) {
        uint8_t expected = seq % 3 == 1 ? body[i] : static_cast<uint8_t>(~body[i]);
        if (answer[i] != expected) return false;
    }
    return true;
}

bool wrong(const char *how, uint64_t seq, std::size_t len) {
    std::fprintf(stderr, "service_client: the answer to request %llu (%s, %zu bytes) is wrong\n",
                 static_cast<unsigned long long>(seq), how, len);
    return false;
}

bool run(const std::string &service, ferry::Transport transport, uint64_t count,
         std::size_t size) {
    ferry::Node node("cpp-service-client");
    ferry::Client client = node.client(service, ferry::Qos().transport(transport).max_message_size(size));
    client.wait_for_server(kTimeout);

    uint64_t calls = count / 2;
    for (uint64_t seq = 0; seq < calls; seq++) {
        std::vector<uint8_t> body = request(seq, size);
        ferry::Response answer = client.call(body.data(), body.size(), kTimeout);
        if (!as_expected(seq, size, answer.data())) return wrong("a call", seq, answer.size());
    }

    uint64_t out_of_order = 0;
    for (uint64_t first = calls; first < count; first += kInFlight) {
        std::map<uint64_t, uint64_t> seq_of_id;
        for (uint64_t seq = first; seq < count && seq < first + kInFlight; seq++) {
            std::vector<uint8_t> body = request(seq, size);
            seq_of_id[client.send(body.data(), body.size())] = seq;
        }
        uint64_t last_id = 0;
        bool first_answer = true;
        while (!seq_of_id.empty()) {
            std::optional<ferry::Response> answer = client.recv(kTimeout);
            if (!answer) {
                std::fprintf(stderr, "service_client: %zu answers did not come within 10 s\n",
                             seq_of_id.size());
                return false;
            }
            auto it = seq_of_id.find(answer->request_id());
            if (it == seq_of_id.end()) {
                std::fprintf(stderr, "service_client: an answer to request id %llu, not sent\n",
                             static_cast<unsigned long long>(answer->request_id()));
                return false;
            }
            if (!as_expected(it->second, size, answer->data()))
                return wrong("sent ahead", it->second, answer->size());
            if (!first_answer && answer->request_id() < last_id) out_of_order++;
            first_answer = false;
            last_id = answer->request_id();
            seq_of_id.erase(it);
        }
    }
    if (client.pending() != 0) {
        std::fprintf(stderr, "service_client: %zu requests still pending\n", client.pending());
        return false;
    }
    std::printf("%s: %llu calls and %llu requests sent ahead (%llu answers out of order) of %zu "
                "bytes, every answer as expected\n",
                service.c_str(), static_cast<unsigned long long>(calls),
                static_cast<unsigned long long>(count - calls),
                static_cast<unsigned long long>(out_of_order), size);
    return true;
}

}  // namespace

int main(int argc, char **argv) {
    std::string service = argc > 1 ? argv[1] : "demo-service";
    std::string transport_name = argc > 2 ? argv[2] : "auto";
    uint64_t count = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 100;
    std::size_t size = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 4096;
    ferry::Transport transport = ferry::Transport::Auto;
    if (transport_name == "shm") transport = ferry::Transport::Shm;
    if (transport_name == "udp") transport = ferry::Transport::Udp;
    bool known = transport_name == "shm" || transport_name == "udp" || transport_name == "auto";
    if (!known || size < 8) {
        std::fprintf(stderr, "usage: service_client [SERVICE [shm|udp|auto [COUNT [SIZE]]]] (SIZE >= 8)\n");
        return 2;
    }
    try {
        return run(service, transport, count, size) ? 0 : 1;
    } catch (const ferry::error &e) {
        std::fprintf(stderr, "service_client: %s\n", e.what());
        return 1;
    }
}
