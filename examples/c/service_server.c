/*
 * service_server.c: the server of a service, through ferry's C API. It answers COUNT requests,
 * then ends. A request carries its sequence number (u64, little endian) in its first 8 bytes,
 * then any bytes (examples/cpp/service_client.cpp sends them); its answer depends on that
 * number, so that each way of answering is used:
 *
 *   seq % 3 == 1: an echo, answered at once from the request's own bytes (read in place, no copy
 *                 of ours: ferry_request_respond(request, ferry_request_data(request), len));
 *   seq % 3 == 2: every byte inverted, answered at once;
 *   seq % 3 == 0: every byte inverted, answered later: the request is released, and its answer
 *                 sent with ferry_server_respond (by client and request id) once 4 such answers
 *                 wait or no request came for 10 ms, the newest first (out of order).
 *
 * Build (from the repository root, after `cargo build --release -p ferry-c`):
 *   cc -std=c11 -O2 -Icrates/ferry-c/include examples/c/service_server.c \
 *      -Ltarget/release -lferry_c -Wl,-rpath,"$PWD/target/release" -o service_server
 * or, installed by crates/ferry-c/install.sh:
 *   cc -std=c11 -O2 examples/c/service_server.c $(pkg-config --cflags --libs ferry) -o service_server
 * Run:
 *   ./service_server demo-service shm 100 & ./service_client demo-service shm 100 4096
 *
 * Usage: service_server [SERVICE [shm|udp|auto [COUNT [TIMEOUT_S [MAX_SIZE]]]]]
 *        (demo-service auto 100 10 65536)
 * Exits 0 once COUNT requests were answered (or their clients had gone), 1 on an error, 3 when
 * no request came for TIMEOUT_S seconds. The domain is $FERRY_DOMAIN, else "default".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ferry.h"

#define EXAMPLE_NAME "service_server"
#include "example.h"

/* Answers kept for later, at most this many before they are sent. */
#define LATER 4

struct later {
    uint64_t client, request;
    uint8_t *answer;
    size_t len;
};

struct counts {
    uint64_t answered, later, gone;
};

static uint64_t seq_of(const uint8_t *data, size_t len) {
    uint64_t seq = 0;
    for (size_t i = 0; i < 8 && i < len; i++) seq |= (uint64_t)data[i] << (8 * i);
    return seq;
}

/* Counts an answer sent (FERRY_OK) or dropped because its client had gone; 0 unless the
 * status is a failure. */
static int counted(ferry_status s, struct counts *c) {
    if (s == FERRY_OK) {
        c->answered++;
        return 0;
    }
    if (s == FERRY_CLIENT_GONE) {
        c->gone++;
        return 0;
    }
    return fail("respond", s);
}

/* Sends the answers kept for later, the newest first. */
static int answer_later(ferry_server *server, struct later *held, size_t *n, struct counts *c) {
    int rc = 0;
    while (*n > 0) {
        struct later *l = &held[--*n];
        ferry_status s = ferry_server_respond(server, l->client, l->request, l->answer, l->len);
        free(l->answer);
        if (rc == 0) rc = counted(s, c);
        if (s == FERRY_OK) c->later++;
    }
    return rc;
}

int main(int argc, char **argv) {
    const char *service = argc > 1 ? argv[1] : "demo-service";
    int32_t transport = parse_transport(argc > 2 ? argv[2] : "auto");
    uint64_t count = argc > 3 ? strtoull(argv[3], NULL, 10) : 100;
    int64_t timeout_s = argc > 4 ? strtoll(argv[4], NULL, 10) : 10;
    size_t max_size = argc > 5 ? strtoull(argv[5], NULL, 10) : 65536;
    if (transport < 0 || timeout_s <= 0 || max_size == 0) {
        fprintf(stderr,
                "usage: service_server [SERVICE [shm|udp|auto [COUNT [TIMEOUT_S [MAX_SIZE]]]]]\n");
        return 2;
    }

    ferry_node *node = NULL;
    ferry_server *server = NULL;
    uint8_t *answer = malloc(max_size);
    struct later held[LATER];
    size_t n_held = 0;
    struct counts c = {0, 0, 0};
    ferry_status s;
    int rc = 1;
    if (answer == NULL) return 1;
    if ((s = ferry_node_new("c-service-server", NULL, &node)) != FERRY_OK) {
        free(answer);
        return fail("node", s);
    }
    ferry_qos qos = ferry_qos_default();
    qos.transport = transport;
    qos.max_message_size = max_size;
    if ((s = ferry_server_new(node, service, &qos, &server)) != FERRY_OK) {
        rc = fail("server", s);
        goto out;
    }
    printf("serving %s\n", service);
    fflush(stdout);

    while (c.answered + c.gone < count) {
        if (c.answered + c.gone + n_held == count) {
            if ((rc = answer_later(server, held, &n_held, &c)) != 0) goto out;
            continue;
        }
        /* While answers wait, look for requests for 10 ms at a time only. */
        int64_t timeout_ns = n_held > 0 ? 10000000LL : timeout_s * 1000000000LL;
        ferry_request *request = NULL;
        s = ferry_server_recv(server, timeout_ns, &request);
        if (s == FERRY_TIMEOUT && n_held > 0) {
            if ((rc = answer_later(server, held, &n_held, &c)) != 0) goto out;
            continue;
        }
        if (s == FERRY_TIMEOUT) {
            fprintf(stderr, "service_server: no request for %lld s; answered %llu of %llu\n",
                    (long long)timeout_s, (unsigned long long)c.answered,
                    (unsigned long long)count);
            rc = 3;
            goto out;
        }
        if (s != FERRY_OK) {
            rc = fail("recv", s);
            goto out;
        }
        const uint8_t *data = ferry_request_data(request);
        size_t len = ferry_request_len(request);
        uint64_t seq = seq_of(data, len);
        if (seq % 3 == 1) {
            /* The request's own bytes, read in place, are the answer. */
            if ((rc = counted(ferry_request_respond(request, data, len), &c)) != 0) goto out;
        } else if (seq % 3 == 2) {
            for (size_t i = 0; i < len; i++) answer[i] = (uint8_t)~data[i];
            if ((rc = counted(ferry_request_respond(request, answer, len), &c)) != 0) goto out;
        } else {
            struct later *l = &held[n_held];
            l->client = ferry_request_client(request);
            l->request = ferry_request_id(request);
            l->len = len;
            l->answer = malloc(len > 0 ? len : 1);
            if (l->answer == NULL) {
                ferry_request_release(request);
                goto out;
            }
            for (size_t i = 0; i < len; i++) l->answer[i] = (uint8_t)~data[i];
            n_held++;
            /* Released unanswered: the client's ring may reuse the bytes; the server remembers
             * the request for ferry_server_respond. */
            if ((s = ferry_request_release(request)) != FERRY_OK) {
                rc = fail("release", s);
                goto out;
            }
            if (n_held == LATER && (rc = answer_later(server, held, &n_held, &c)) != 0) goto out;
        }
    }
    printf("answered %llu requests (%llu later, out of order); %llu clients gone\n",
           (unsigned long long)c.answered, (unsigned long long)c.later,
           (unsigned long long)c.gone);
    rc = 0;
out:
    while (n_held > 0) free(held[--n_held].answer);
    free(answer);
    ferry_server_free(server);
    ferry_node_free(node);
    return rc;
}
