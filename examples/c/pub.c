/*
 * pub.c: publishes COUNT messages of SIZE bytes on TOPIC, written in place (zero copy), once a
 * subscriber is there. Each message carries the pattern of `ferry pub`: its sequence number
 * (u64, little endian) first when it fits, then the number's low byte in every other byte.
 *
 * Build (from the repository root, after `cargo build --release -p ferry-c`):
 *   cc -std=c11 -O2 -Icrates/ferry-c/include examples/c/pub.c \
 *      -Ltarget/release -lferry_c -Wl,-rpath,"$PWD/target/release" -o pub
 * Run:
 *   ./sub demo shm 10 &  ./pub demo shm 1024 10
 *   ./pub demo udp 100000 10   (with `ferry echo demo --transport udp --count 10`)
 *
 * Usage: pub [TOPIC [shm|udp|auto [SIZE [COUNT]]]]   (demo auto 64 10)
 * The domain is $FERRY_DOMAIN, else "default".
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ferry.h"

#define EXAMPLE_NAME "pub"
#include "example.h"

/* The sequence number (u64 little endian) first if it fits, then its low byte repeated. */
static void write_payload(uint8_t *buf, size_t len, uint64_t seq) {
    memset(buf, (int)(seq & 0xff), len);
    for (size_t i = 0; i < 8 && len >= 8; i++) buf[i] = (uint8_t)(seq >> (8 * i));
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
    const char *topic = argc > 1 ? argv[1] : "demo";
    int32_t transport = parse_transport(argc > 2 ? argv[2] : "auto");
    size_t size = argc > 3 ? strtoull(argv[3], NULL, 10) : 64;
    uint64_t count = argc > 4 ? strtoull(argv[4], NULL, 10) : 10;
    if (transport < 0 || size == 0) {
        fprintf(stderr, "usage: pub [TOPIC [shm|udp|auto [SIZE [COUNT]]]]\n");
        return 2;
    }

    ferry_node *node = NULL;
    ferry_publisher *pub = NULL;
    ferry_status s;
    int rc = 1;
    if ((s = ferry_node_new("c-pub", NULL, &node)) != FERRY_OK) return fail("node", s);
    ferry_qos qos = ferry_qos_default();
    qos.transport = transport;
    qos.max_message_size = size;
    if ((s = ferry_publisher_new(node, topic, &qos, &pub)) != FERRY_OK) {
        rc = fail("publisher", s);
        goto out;
    }

    /* Wait (at most 10 s) for a subscriber: what is sent before one is there is lost to it. */
    for (int waited = 0;; waited++) {
        size_t n = 0;
        if ((s = ferry_publisher_subscriber_count(pub, &n)) != FERRY_OK) {
            rc = fail("subscriber count", s);
            goto out;
        }
        if (n > 0) break;
        if (waited == 10000) {
            fprintf(stderr, "pub: no subscriber on %s within 10 s\n", topic);
            goto out;
        }
        sleep_ms(1);
    }

    for (uint64_t seq = 0; seq < count; seq++) {
        ferry_loan *loan = NULL;
        if ((s = ferry_publisher_loan(pub, size, &loan)) != FERRY_OK) {
            rc = fail("loan", s);
            goto out;
        }
        write_payload(ferry_loan_data(loan), ferry_loan_len(loan), seq);
        if ((s = ferry_loan_send(loan)) != FERRY_OK) {
            rc = fail("send", s);
            goto out;
        }
    }
    printf("sent %llu messages of %zu bytes on %s\n", (unsigned long long)count, size, topic);
    rc = 0;
out:
    /* A UDP publisher waits here, briefly, for reliable subscribers to catch up. */
    if ((s = ferry_publisher_free(pub)) != FERRY_OK) rc = fail("free publisher", s);
    ferry_node_free(node);
    return rc;
}
