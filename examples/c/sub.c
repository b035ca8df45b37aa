/*
 * sub.c: receives COUNT messages on TOPIC, reads them in place (zero copy) and checks every
 * byte against the pattern of `ferry pub` and examples/c/pub.c: the sequence number (u64,
 * little endian) first when it fits, then its low byte in every other byte; sequence numbers
 * from 0 without a gap.
 *
 * Build (from the repository root, after `cargo build --release -p ferry-c`):
 *   cc -std=c11 -O2 -Icrates/ferry-c/include examples/c/sub.c \
 *      -Ltarget/release -lferry_c -Wl,-rpath,"$PWD/target/release" -o sub
 * Run:
 *   ./sub demo shm 10 &  ./pub demo shm 1024 10
 *   ./sub demo udp 10    (with `ferry pub demo --transport udp --count 10 --wait-subscribers 1`)
 *
 * Usage: sub [TOPIC [shm|udp|auto [COUNT [TIMEOUT_S]]]]   (demo auto 10 10)
 * Exits 0 when every message arrived intact, 1 on a wrong byte or an error, 3 when no message
 * came for TIMEOUT_S seconds. The domain is $FERRY_DOMAIN, else "default".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry.h"

#define EXAMPLE_NAME "sub"
#include "example.h"

/* Where the message differs from the pattern for `seq`, or -1 if it does not. */
static long long first_wrong_byte(const uint8_t *data, size_t len, uint64_t seq) {
    size_t head = len >= 8 ? 8 : 0;
    for (size_t i = 0; i < head; i++)
        if (data[i] != (uint8_t)(seq >> (8 * i))) return (long long)i;
    for (size_t i = head; i < len; i++)
        if (data[i] != (uint8_t)(seq & 0xff)) return (long long)i;
    return -1;
}

int main(int argc, char **argv) {
    const char *topic = argc > 1 ? argv[1] : "demo";
    int32_t transport = parse_transport(argc > 2 ? argv[2] : "auto");
    uint64_t count = argc > 3 ? strtoull(argv[3], NULL, 10) : 10;
    int64_t timeout_s = argc > 4 ? strtoll(argv[4], NULL, 10) : 10;
    if (transport < 0 || timeout_s <= 0) {
        fprintf(stderr, "usage: sub [TOPIC [shm|udp|auto [COUNT [TIMEOUT_S]]]]\n");
        return 2;
    }

    ferry_node *node = NULL;
    ferry_subscriber *sub = NULL;
    ferry_status s;
    int rc = 1;
    if ((s = ferry_node_new("c-sub", NULL, &node)) != FERRY_OK) return fail("node", s);
    ferry_qos qos = ferry_qos_default();
    qos.transport = transport;
    if ((s = ferry_subscriber_new(node, topic, &qos, &sub)) != FERRY_OK) {
        rc = fail("subscriber", s);
        goto out;
    }

    unsigned long long bytes = 0;
    for (uint64_t expected = 0; expected < count; expected++) {
        ferry_sample *sample = NULL;
        s = ferry_subscriber_recv(sub, timeout_s * 1000000000LL, &sample);
        if (s == FERRY_TIMEOUT) {
            fprintf(stderr, "sub: no message on %s for %lld s; received %llu of %llu\n", topic,
                    (long long)timeout_s, (unsigned long long)expected,
                    (unsigned long long)count);
            rc = 3;
            goto out;
        }
        if (s != FERRY_OK) {
            rc = fail("recv", s);
            goto out;
        }
        const uint8_t *data = ferry_sample_data(sample);
        size_t len = ferry_sample_len(sample);
        uint64_t seq = ferry_sample_seq(sample);
        long long wrong = first_wrong_byte(data, len, expected);
        if (seq != expected || wrong >= 0) {
            fprintf(stderr,
                    "sub: message %llu (seq %llu, %zu bytes) is not the one expected: "
                    "first wrong byte at %lld\n",
                    (unsigned long long)expected, (unsigned long long)seq, len, wrong);
            ferry_sample_release(sample);
            goto out;
        }
        bytes += len;
        if ((s = ferry_sample_release(sample)) != FERRY_OK) {
            rc = fail("release", s);
            goto out;
        }
    }
    printf("received %llu messages, %llu bytes, every byte as expected\n",
           (unsigned long long)count, bytes);
    rc = 0;
out:
    ferry_subscriber_free(sub);
    ferry_node_free(node);
    return rc;
}
