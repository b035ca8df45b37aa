/*
 * pingpong.c: one-way latency (round trip / 2) of a shared-memory ping-pong through ferry's C
 * API, for comparison with the same loop in Rust (crates/ferry-c/examples/pingpong.rs). Two
 * threads, pinned to CPUs 0 and 1, each with a publisher and a subscriber (reliable, spinning).
 * Every message is written in place through a loan (every byte, memset) and read in place (every
 * byte checked, memcmp: the same libc calls as the Rust twin, so that the difference is the API).
 *
 * Build (from the repository root, after `cargo build --release -p ferry-c`):
 *   cc -std=c11 -O3 -Icrates/ferry-c/include examples/c/pingpong.c \
 *      -Ltarget/release -lferry_c -Wl,-rpath,"$PWD/target/release" -lpthread -o pingpong
 * Run:
 *   ./pingpong SIZE SAMPLES [WARMUP]
 * Prints one line: size=… samples=… p50_ns=… p90_ns=… p99_ns=…
 * `cargo test --release -p ferry-c --test overhead -- --ignored --nocapture` runs it against
 * the Rust loop in interleaved rounds.
 */
#define _GNU_SOURCE /* pthread_setaffinity_np, CPU_SET */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferry.h"

struct end {
    ferry_publisher *out;
    ferry_subscriber *in;
};

struct run {
    size_t size;
    uint64_t total; /* warm-up and recorded round trips */
    char ping[64], pong[64];
    ferry_node *node;
};

static void die(const char *what, ferry_status s) {
    fprintf(stderr, "pingpong: %s: %s: %s\n", what, ferry_status_name(s),
            ferry_last_error_message());
    exit(1);
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
        fprintf(stderr, "pingpong: cannot pin to CPU %d\n", cpu);
        exit(1);
    }
}

static uint8_t pattern(uint64_t seq, int pong) { return (uint8_t)((seq + (pong ? 128 : 0)) % 255 + 1); }

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void open_end(struct run *r, struct end *e, const char *out, const char *in) {
    ferry_qos qos = ferry_qos_default();
    qos.transport = FERRY_TRANSPORT_SHM;
    qos.wait = FERRY_WAIT_SPIN;
    qos.max_message_size = r->size;
    ferry_status s;
    if ((s = ferry_subscriber_new(r->node, in, &qos, &e->in)) != FERRY_OK) die("subscriber", s);
    if ((s = ferry_publisher_new(r->node, out, &qos, &e->out)) != FERRY_OK) die("publisher", s);
}

/* Waits until this end's publisher serves the other end's subscriber. */
static void await_peer(struct end *e) {
    for (;;) {
        size_t subs = 0, pubs = 0;
        ferry_status s;
        if ((s = ferry_subscriber_publisher_count(e->in, &pubs)) != FERRY_OK) die("count", s);
        if ((s = ferry_publisher_subscriber_count(e->out, &subs)) != FERRY_OK) die("count", s);
        if (subs > 0 && pubs > 0) return;
        usleep(100);
    }
}

static void send_msg(struct end *e, size_t size, uint8_t byte) {
    ferry_loan *loan;
    ferry_status s;
    if ((s = ferry_publisher_loan(e->out, size, &loan)) != FERRY_OK) die("loan", s);
    memset(ferry_loan_data(loan), byte, size);
    if ((s = ferry_loan_send(loan)) != FERRY_OK) die("send", s);
}

static void recv_msg(struct end *e, size_t size, uint8_t byte) {
    ferry_sample *sample;
    ferry_status s;
    if ((s = ferry_subscriber_recv(e->in, -1, &sample)) != FERRY_OK) die("recv", s);
    const uint8_t *p = ferry_sample_data(sample);
    size_t len = ferry_sample_len(sample);
    /* Every byte is `byte`: the first is, and each equals the next (glibc's memcmp, as in the
     * Rust twin, so that both do the same payload work). */
    if (len != size || (len > 0 && (p[0] != byte || memcmp(p, p + 1, len - 1) != 0))) {
        fprintf(stderr, "pingpong: a damaged message (%zu bytes)\n", len);
        exit(1);
    }
    if ((s = ferry_sample_release(sample)) != FERRY_OK) die("release", s);
}

static void *pong(void *arg) {
    struct run *r = arg;
    pin(1);
    struct end e;
    open_end(r, &e, r->pong, r->ping);
    await_peer(&e);
    for (uint64_t seq = 0; seq < r->total; seq++) {
        recv_msg(&e, r->size, pattern(seq, 0));
        send_msg(&e, r->size, pattern(seq, 1));
    }
    /* Stay until the ping side has left, so that its last reply is read. */
    for (size_t pubs = 1; pubs > 0;) {
        ferry_sample *sample;
        if (ferry_subscriber_recv(e.in, 1000000, &sample) == FERRY_OK) ferry_sample_release(sample);
        ferry_subscriber_publisher_count(e.in, &pubs);
    }
    ferry_publisher_free(e.out);
    ferry_subscriber_free(e.in);
    return NULL;
}

static int by_value(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: pingpong SIZE SAMPLES [WARMUP]\n");
        return 2;
    }
    struct run r = {0};
    r.size = strtoull(argv[1], NULL, 10);
    uint64_t samples = strtoull(argv[2], NULL, 10);
    uint64_t warmup = argc > 3 ? strtoull(argv[3], NULL, 10) : samples / 10;
    r.total = warmup + samples;
    snprintf(r.ping, sizeof r.ping, "ping-%d", (int)getpid());
    snprintf(r.pong, sizeof r.pong, "pong-%d", (int)getpid());
    ferry_status s;
    if ((s = ferry_node_new("pingpong-c", NULL, &r.node)) != FERRY_OK) die("node", s);

    pin(0);
    struct end e;
    open_end(&r, &e, r.ping, r.pong);
    pthread_t peer;
    if (pthread_create(&peer, NULL, pong, &r) != 0) return 1;
    await_peer(&e);

    uint64_t *one_way = malloc(samples * sizeof *one_way);
    if (one_way == NULL) return 1;
    for (uint64_t seq = 0; seq < r.total; seq++) {
        uint64_t t0 = now_ns();
        send_msg(&e, r.size, pattern(seq, 0));
        recv_msg(&e, r.size, pattern(seq, 1));
        uint64_t rt = now_ns() - t0;
        if (seq >= warmup) one_way[seq - warmup] = rt / 2;
    }
    ferry_publisher_free(e.out);
    ferry_subscriber_free(e.in);
    pthread_join(peer, NULL);
    ferry_node_free(r.node);

    qsort(one_way, samples, sizeof *one_way, by_value);
    printf("size=%zu samples=%llu p50_ns=%llu p90_ns=%llu p99_ns=%llu\n", r.size,
           (unsigned long long)samples, (unsigned long long)one_way[samples / 2],
           (unsigned long long)one_way[samples * 9 / 10],
           (unsigned long long)one_way[samples * 99 / 100]);
    free(one_way);
    return 0;
}
