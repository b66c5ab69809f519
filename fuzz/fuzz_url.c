/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: arbitrary bytes as a Redis URL (include/leash/url.h).
 * Beyond "no crash": a refusal leaves a terminated "redis URL: " line; an
 * accepted URL is one address (host or socket path), in range, and formats
 * to a URL that does not depend on the password and parses back to the same
 * address. fuzz/run.sh runs it on fuzz/corpus-url/.
 */
#include <leash/url.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *url = malloc(size + 1), err[LEASH_URL_ERR_MAX], buf[4096], buf2[4096];
    leash_url u, back;
    int n;

    if (url == NULL)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    memset(err, 'x', sizeof(err));
    if (leash_url_parse(url, &u, err, sizeof(err)) != LEASH_OK) {
        if (memchr(err, '\0', sizeof(err)) == NULL || strncmp(err, "redis URL: ", 11) != 0)
            abort();
        free(url);
        return 0;
    }
    if (err[0] != '\0' || (u.host[0] == '\0') == (u.unix_path[0] == '\0'))
        abort();
    if (u.db < 0 || (u.host[0] != '\0' && (u.port < 1 || u.port > 65535)))
        abort();
    if (u.username[0] != '\0' && u.password[0] == '\0')
        abort();
    n = leash_url_format(&u, buf, sizeof(buf));
    if (n < 0 || (size_t)n >= sizeof(buf) || strlen(buf) != (size_t)n)
        abort();
    /* The password leaves no trace: another one formats the same. */
    back = u;
    if (back.password[0] != '\0')
        strcpy(back.password, "other");
    if (leash_url_format(&back, buf2, sizeof(buf2)) != n || strcmp(buf, buf2) != 0)
        abort();
    if (leash_url_parse(buf, &back, err, sizeof(err)) != LEASH_OK)
        abort();
    if (strcmp(back.host, u.host) != 0 || strcmp(back.unix_path, u.unix_path) != 0 ||
        strcmp(back.username, u.username) != 0 || back.port != u.port || back.db != u.db ||
        (u.password[0] != '\0') != (back.password[0] != '\0'))
        abort();
    free(url);
    return 0;
}
