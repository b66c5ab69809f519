/* SPDX-License-Identifier: MIT */
/* Status names and messages, from the one table in leash.h. */
#include <leash/leash.h>

#define LEASH__STR_(x) #x
#define LEASH__STR(x) LEASH__STR_(x)

const char *leash_version(void) {
    return LEASH__STR(LEASH_VERSION_MAJOR) "." LEASH__STR(LEASH_VERSION_MINOR) "." LEASH__STR(
        LEASH_VERSION_PATCH);
}

const char *leash_strerror(int status) {
    switch (status) {
#define LEASH__MSG_CASE(name, num, msg) \
    case num:                           \
        return msg;
        LEASH_STATUS_MAP(LEASH__MSG_CASE)
#undef LEASH__MSG_CASE
    }
    return "unknown status";
}

const char *leash_status_name(int status) {
    switch (status) {
#define LEASH__NAME_CASE(name, num, msg) \
    case num:                            \
        return "LEASH_" #name;
        LEASH_STATUS_MAP(LEASH__NAME_CASE)
#undef LEASH__NAME_CASE
    }
    return "LEASH_UNKNOWN";
}

const char *leash_lost_reason_name(int reason) {
    switch (reason) {
    case LEASH_LOST_EXPIRED:
        return "expired";
    case LEASH_LOST_UNREACHABLE:
        return "unreachable";
    case LEASH_LOST_MAX_HOLD:
        return "max-hold";
    case LEASH_LOST_FIXED_LEASE:
        return "fixed-lease";
    case LEASH_LOST_REPLICAS:
        return "replicas";
    }
    return "unknown";
}
