/* SPDX-License-Identifier: MIT */
/*
 * One intrusive list for every list of the library: a circular doubly
 * linked ring with a sentinel head, embedded in the objects it links
 * (libuv's queue.h is the model). Removing a node twice is harmless: a
 * removed node points at itself.
 */
#ifndef LEASH_BASE_LIST_H
#define LEASH_BASE_LIST_H

#include <stddef.h>

typedef struct leash__list {
    struct leash__list *next, *prev;
} leash__list;

/* The object that embeds `ptr` as its member `member`. */
#define LEASH__CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

static inline void leash__list_init(leash__list *l) {
    l->next = l->prev = l;
}

static inline int leash__list_empty(const leash__list *head) {
    return head->next == head;
}

/* 1 while n is in a list (it was inserted and not removed since). */
static inline int leash__list_linked(const leash__list *n) {
    return n->next != n;
}

static inline void leash__list_insert_after(leash__list *at, leash__list *n) {
    n->prev = at;
    n->next = at->next;
    at->next->prev = n;
    at->next = n;
}

static inline void leash__list_insert_tail(leash__list *head, leash__list *n) {
    leash__list_insert_after(head->prev, n);
}

static inline void leash__list_remove(leash__list *n) {
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->next = n->prev = n;
}

/* Moves every node of `from` to the end of `to`; `from` ends empty. */
static inline void leash__list_splice_tail(leash__list *to, leash__list *from) {
    if (leash__list_empty(from))
        return;
    from->next->prev = to->prev;
    to->prev->next = from->next;
    from->prev->next = to;
    to->prev = from->prev;
    leash__list_init(from);
}

#define LEASH__LIST_FIRST(head) ((head)->next)

#endif
