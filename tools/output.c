/* SPDX-License-Identifier: MIT */
/*
 * Printing: strings for people (lock names may hold any byte but NUL) and
 * for JSON, durations, timestamps, and one lock state as a JSON object.
 */
#include "cli.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

/* The length of the well-formed UTF-8 sequence of more than one byte at
 * p (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF),
 * or 0. */
static size_t utf8_len(const unsigned char *p, size_t left) {
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n, i;

    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (p[0] == 0xe0)
        lo = 0xa0;
    else if (p[0] == 0xed)
        hi = 0x9f;
    else if (p[0] == 0xf0)
        lo = 0x90;
    else if (p[0] == 0xf4)
        hi = 0x8f;
    if (left < n || p[1] < lo || p[1] > hi)
        return 0;
    for (i = 2; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* JSON text is UTF-8 (RFC 8259): a byte of a name that is not part of a
 * well-formed sequence becomes U+FFFD, as a strict reader would make it,
 * rather than output that such a reader refuses whole. */
void cli_json_str(FILE *f, const char *s, size_t len) {
    size_t i, n;

    fputc('"', f);
    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x80) {
            n = utf8_len((const unsigned char *)s + i, len - i);
            if (n == 0) {
                fputs("\\ufffd", f);
            } else {
                fwrite(s + i, 1, n, f);
                i += n - 1;
            }
        } else if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch == '\t')
            fputs("\\t", f);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void cli_text_str(FILE *f, const char *s, size_t len) {
    size_t i;

    for (i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch >= 0x7f || ch == '\\')
            fprintf(f, "\\x%02x", ch);
        else
            fputc(ch, f);
    }
}

const char *cli_ms_text(int64_t ms, char *buf, size_t size) {
    if (ms < 0)
        snprintf(buf, size, "-");
    else if (ms < 1000)
        snprintf(buf, size, "%" PRId64 "ms", ms);
    else
        snprintf(buf, size, "%" PRId64 ".%" PRId64 "s", ms / 1000, ms % 1000 / 100);
    return buf;
}

const char *cli_now_text(char *buf, size_t size) {
    struct timespec ts;
    struct tm tm;
    char day[32];

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03ldZ", day, ts.tv_nsec / 1000000);
    return buf;
}

const char *cli_token_text(const char *tok, int full, char *buf, size_t size) {
    if (full || strlen(tok) <= 12)
        snprintf(buf, size, "%s", tok);
    else
        snprintf(buf, size, "%.12s..", tok);
    return buf;
}

static void holders_json(FILE *f, const char *name, const cli_holder *h, size_t n, int queue) {
    size_t i;

    fprintf(f, ",\"%s\":[", name);
    for (i = 0; i < n; i++) {
        fprintf(f, "%s{\"token\":", i ? "," : "");
        cli_json_str(f, h[i].token, strlen(h[i].token));
        if (h[i].mode != 'm' && h[i].mode != 'R')
            fprintf(f, ",\"mode\":\"%s\"",
                    h[i].mode == 'r'   ? "read"
                    : h[i].mode == 'w' ? "write"
                    : h[i].mode == 's' ? "permit"
                                       : "fair");
        if (queue)
            fprintf(f, ",\"place\":%" PRId64, h[i].count);
        else
            fprintf(f, ",\"count\":%" PRId64, h[i].count);
        if (h[i].fence != 0)
            fprintf(f, ",\"fence\":%" PRIu64, h[i].fence);
        fprintf(f, ",\"ttl_ms\":%" PRId64 "}", h[i].ttl_ms);
    }
    fputc(']', f);
}

const char *cli_rw_mode(const cli_lockstate *s) {
    size_t i;

    for (i = 0; i < s->nholders; i++)
        if (s->holders[i].mode == 'w')
            return "write";
    return "read";
}

/* The fields of one state, without braces, so that callers can add theirs. */
void cli_print_state_json(FILE *f, const cli_lockstate *s) {
    fprintf(f, "\"kind\":\"%s\",\"server\":", cli_kind_name(s->kind));
    cli_json_str(f, s->node, strlen(s->node));
    fprintf(f, ",\"ttl_ms\":%" PRId64, s->ttl_ms);
    if (s->fence != 0)
        fprintf(f, ",\"fence\":%" PRIu64, s->fence);
    if (s->fence_max > s->fence)
        fprintf(f, ",\"fence_max\":%" PRIu64, s->fence_max);
    if (s->kind == LEASH__STATE_MUTEX)
        fprintf(f, ",\"marked\":%s", s->marked ? "true" : "false");
    if (s->kind == LEASH__STATE_SEMAPHORE)
        fprintf(f, ",\"permits\":%" PRId64, s->permits);
    if (s->kind == LEASH__STATE_REDISSON_RW)
        fprintf(f, ",\"mode\":\"%s\"", cli_rw_mode(s));
    holders_json(f, "holders", s->holders, s->nholders, 0);
    /* A mutex's queue: its starving waiters (the others wait on its
     * channel: subscribers). Redisson's waiters queue in no key read. */
    if (s->kind != LEASH__STATE_REDISSON && s->kind != LEASH__STATE_REDISSON_RW &&
        s->kind != LEASH__STATE_NONE && s->kind != LEASH__STATE_OTHER)
        holders_json(f, "waiters", s->waiters, s->nwaiters, 1);
    if (s->subscribers >= 0 && (s->kind == LEASH__STATE_MUTEX || s->kind == LEASH__STATE_NONE))
        fprintf(f, ",\"subscribers\":%" PRId64, s->subscribers);
}

void cli_print_table(FILE *f, const char *text, size_t len) {
    size_t width[16] = {0}, i, col = 0, cell = 0;

    for (i = 0; i < len; i++) {
        if (text[i] == '\t' || text[i] == '\n') {
            if (col < 16 && cell > width[col])
                width[col] = cell;
            col = text[i] == '\t' ? col + 1 : 0;
            cell = 0;
        } else {
            cell++;
        }
    }
    for (i = 0, col = 0, cell = 0; i < len; i++) {
        if (text[i] == '\t') {
            for (; col < 16 && cell < width[col] + 2; cell++)
                fputc(' ', f);
            col++;
            cell = 0;
        } else {
            fputc(text[i], f);
            cell++;
            if (text[i] == '\n')
                col = cell = 0;
        }
    }
}
