/*
 * example.h: what the C examples (pub.c, sub.c, service_server.c) share that is not ferry's: the
 * transport named on the command line, and a failed call reported with ferry's own message.
 * Define EXAMPLE_NAME, the program's name that starts each message, before including it.
 */
#ifndef FERRY_EXAMPLE_H
#define FERRY_EXAMPLE_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ferry.h"

/* Prints what failed, its status and the thread's last error message; returns 1 (an exit
 * status). */
static inline int fail(const char *what, ferry_status status) {
    fprintf(stderr, EXAMPLE_NAME ": %s: %s: %s\n", what, ferry_status_name(status),
            ferry_last_error_message());
    return 1;
}

/* The transport named on the command line, or -1. */
static inline int32_t parse_transport(const char *name) {
    if (strcmp(name, "shm") == 0) return FERRY_TRANSPORT_SHM;
    if (strcmp(name, "udp") == 0) return FERRY_TRANSPORT_UDP;
    if (strcmp(name, "auto") == 0) return FERRY_TRANSPORT_AUTO;
    return -1;
}

#endif
