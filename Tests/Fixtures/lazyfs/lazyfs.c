/*
 * lazyfs: a FUSE file system that forgets everything not fsynced when told
 * to "lose power". Written for cached's power-loss tests (in the spirit of
 * the LazyFS that Jepsen uses, but its own code and a simpler model).
 *
 *   lazyfs [--debug] [--exit-with-parent] [--durable DIR] BACKING MOUNTPOINT
 *
 * A passthrough file system over the directory BACKING, mounted at
 * MOUNTPOINT, served by one thread (requests are handled one at a time, so
 * the model below never races with itself). BACKING always holds the
 * CURRENT state, exactly what a reader of the mount sees. Beside it, lazyfs
 * keeps the DURABLE state: what a disk would hold after a power cut.
 *
 * The model of durability (pessimistic POSIX, like ext4 without its
 * journal's ordering luck):
 *
 *  - Everything in BACKING when lazyfs starts is durable.
 *  - File data: bytes written (write, truncate, fallocate, O_TRUNC) reach
 *    the durable state only at fsync or fdatasync of that file (through any
 *    descriptor of the inode). fsync copies the inode's current bytes and
 *    size to its durable copy, DURABLE/<node id>. An inode never fsynced has
 *    no durable bytes: if its name survives, it comes back empty. The
 *    inode's permission bits are taken at its fsync too.
 *  - Directory entries: create, mknod, mkdir, symlink, link, rename, unlink
 *    and rmdir change a directory's durable entries only at fsync of THAT
 *    directory (an O_DIRECTORY descriptor; FUSE's fsyncdir), which records
 *    the directory's current list of (name -> inode). So a new file fsynced
 *    but whose directory was not disappears; a rename is durable once the
 *    target's directory is fsynced (the source name goes away only when the
 *    source directory is fsynced too: until then both names may survive,
 *    as hard links to the same inode); a new subdirectory needs its parent
 *    fsynced, and comes back empty unless it was fsynced itself.
 *  - Inodes are tracked by identity (a node id given at creation), not by
 *    name: a durable entry names an inode, and the bytes it comes back with
 *    are that inode's last fsynced bytes, even if the inode was since
 *    renamed, unlinked or written to.
 *  - Not modelled (never durable, never lost): timestamps, ownership,
 *    extended attributes. Locks (flock, fcntl) are left to the kernel,
 *    which keeps them for the mount's lifetime.
 *
 * Power loss: write "powerloss" to /.lazyfs-ctl (a file only at the mount's
 * root; it is not listed). In that one request lazyfs empties BACKING and
 * rebuilds it from the durable state alone (directories from their recorded
 * entries, files from their durable copies, hard links kept), answers the
 * write, refuses every later request with EIO and unmounts: the machine is
 * off. Whoever uses the mount must be stopped BEFORE (kill -9, then wait for
 * the process to exit): anything written after the cut would be wrong.
 * Mounting BACKING again then serves exactly the durable state, and it is
 * all durable again. A normal unmount (fusermount3 -u) is a clean shutdown:
 * BACKING keeps the current state. Reading /.lazyfs-ctl gives counters.
 *
 * Data reads go through the kernel page cache (no direct_io), so mmap,
 * sendfile and preadv2 work; writes are write-through (no writeback cache),
 * so every write reaches lazyfs before write(2) returns.
 *
 * Build: cc -O2 -Wall -o lazyfs lazyfs.c $(pkg-config --cflags --libs fuse3)
 */
#define FUSE_USE_VERSION 31
#define _GNU_SOURCE
#include <fuse.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#define CTL_NAME ".lazyfs-ctl"
#define CTL_PATH "/" CTL_NAME
#define CTL_INO ((ino_t)0x7ffffffffffffff1ULL)

/* One inode of the model. Nodes are never freed: durable entries point at them. */
struct node;
struct dent {
    char *name;
    struct node *node;
};

struct node {
    uint64_t id;
    ino_t ino;            /* its inode in BACKING now; 0 once another node took that number */
    mode_t kind;          /* S_IFREG, S_IFDIR, S_IFLNK, ... */
    mode_t mode;          /* durable permission bits; 0 = not recorded yet */
    int has_data;         /* DURABLE/<id> holds its last fsynced bytes */
    off_t dirty_lo, dirty_hi; /* hull of bytes changed since the last fsync (lo >= hi: none) */
    struct dent *ents;    /* directories: the entries at the last fsync */
    size_t nents;
    char *target;         /* symlinks */
    struct node *hnext;   /* ino hash chain */
    struct node *anext;   /* every node */
    /* scratch for the rebuild */
    char *built;          /* where it was first rebuilt (hard links) */
    int visited;
};

struct handle {
    int fd;
    struct node *node;
    int ctl;
};

static struct {
    char *backing;
    char *durable;
    int durable_owned;
    int bfd;              /* BACKING */
    int dfd;              /* DURABLE */
    uint64_t next_id;
    struct node *all;
    struct node *hash[4096];
    struct node *root;
    int dead;             /* after a power loss */
    int debug;
    /* counters */
    unsigned long long writes, bytes_written, fsyncs, fsyncdirs, creates, renames, unlinks, powerlosses;
} g;

static void logmsg(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lazyfs: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void die(const char *what) {
    logmsg("%s: %s", what, strerror(errno));
    exit(1);
}

/* ---- the node table ---- */

static struct node *find_ino(ino_t ino) {
    for (struct node *n = g.hash[ino % 4096]; n; n = n->hnext)
        if (n->ino == ino) return n;
    return NULL;
}

static void unhash(struct node *n) {
    struct node **p = &g.hash[n->ino % 4096];
    while (*p && *p != n) p = &(*p)->hnext;
    if (*p) *p = n->hnext;
    n->hnext = NULL;
    n->ino = 0;
}

/* A new inode appeared in BACKING with number `ino`: a fresh node (any node
 * that had that number before belongs to an inode that is gone). */
static struct node *new_node(ino_t ino, mode_t st_mode) {
    struct node *old = find_ino(ino);
    if (old) unhash(old);
    struct node *n = calloc(1, sizeof *n);
    if (!n) die("calloc");
    n->id = ++g.next_id;
    n->ino = ino;
    n->kind = st_mode & S_IFMT;
    n->hnext = g.hash[ino % 4096];
    g.hash[ino % 4096] = n;
    n->anext = g.all;
    g.all = n;
    return n;
}

/* The node of an existing inode (one is made if lazyfs never saw it). */
static struct node *node_of(const struct stat *st) {
    struct node *n = find_ino(st->st_ino);
    if (n && n->kind == (st->st_mode & S_IFMT)) return n;
    return new_node(st->st_ino, st->st_mode);
}

static void mark_dirty(struct node *n, off_t lo, off_t hi) {
    if (!n || lo >= hi) return;
    if (n->dirty_lo >= n->dirty_hi) { n->dirty_lo = lo; n->dirty_hi = hi; return; }
    if (lo < n->dirty_lo) n->dirty_lo = lo;
    if (hi > n->dirty_hi) n->dirty_hi = hi;
}

/* ---- paths ---- */

static const char *rel(const char *path) {
    while (*path == '/') path++;
    return *path ? path : ".";
}

static int is_ctl(const char *path) { return path && strcmp(path, CTL_PATH) == 0; }

static struct handle *H(struct fuse_file_info *fi) {
    return fi ? (struct handle *)(uintptr_t)fi->fh : NULL;
}

#define ALIVE() do { if (g.dead) return -EIO; } while (0)

/* ---- copying bytes ---- */

static int copy_range(int from, int to, off_t lo, off_t hi) {
    static char buf[1 << 17];
    while (lo < hi) {
        size_t want = (size_t)(hi - lo) < sizeof buf ? (size_t)(hi - lo) : sizeof buf;
        ssize_t n = pread(from, buf, want, lo);
        if (n < 0) { if (errno == EINTR) continue; return -errno; }
        if (n == 0) break;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = pwrite(to, buf + done, (size_t)(n - done), lo + done);
            if (w < 0) { if (errno == EINTR) continue; return -errno; }
            done += w;
        }
        lo += n;
    }
    return 0;
}

static void durable_name(const struct node *n, char *out, size_t len) {
    snprintf(out, len, "%llu", (unsigned long long)n->id);
}

/* fsync of a file: its current bytes, size and mode become its durable state. */
static int sync_file(struct node *n, int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return -errno;
    if (!n) n = node_of(&st);
    g.fsyncs++;
    if (!S_ISREG(st.st_mode)) return 0;
    char name[32];
    durable_name(n, name, sizeof name);
    int flags = O_WRONLY | O_CLOEXEC | (n->has_data ? 0 : O_CREAT | O_TRUNC);
    int dfd = openat(g.dfd, name, flags, 0600);
    if (dfd < 0) return -errno;
    int rc = 0;
    if (ftruncate(dfd, st.st_size) != 0) rc = -errno;
    if (rc == 0) {
        off_t lo = n->has_data ? n->dirty_lo : 0, hi = n->has_data ? n->dirty_hi : st.st_size;
        if (hi > st.st_size) hi = st.st_size;
        if (lo < hi) rc = copy_range(fd, dfd, lo, hi);
    }
    close(dfd);
    if (rc == 0) {
        n->has_data = 1;
        n->dirty_lo = n->dirty_hi = 0;
        n->mode = st.st_mode & 07777;
    }
    return rc;
}

static void free_ents(struct node *n) {
    for (size_t i = 0; i < n->nents; i++) free(n->ents[i].name);
    free(n->ents);
    n->ents = NULL;
    n->nents = 0;
}

/* Records the entries of the directory open as `fd` (node `n`) as its durable ones. */
static int record_dir(struct node *n, int fd) {
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0) return -errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) { int e = -errno; close(dup_fd); return e; }
    struct dent *ents = NULL;
    size_t count = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (n == g.root && !strcmp(e->d_name, CTL_NAME)) continue;
        struct stat st;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        struct node *c = node_of(&st);
        if (!c->mode) c->mode = st.st_mode & 07777;
        if (S_ISLNK(st.st_mode) && !c->target) {
            char buf[PATH_MAX];
            ssize_t len = readlinkat(fd, e->d_name, buf, sizeof buf - 1);
            if (len >= 0) { buf[len] = 0; c->target = strdup(buf); }
        }
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            ents = realloc(ents, cap * sizeof *ents);
            if (!ents) die("realloc");
        }
        ents[count].name = strdup(e->d_name);
        ents[count].node = c;
        count++;
    }
    closedir(d);
    free_ents(n);
    n->ents = ents;
    n->nents = count;
    struct stat self;
    if (fstat(fd, &self) == 0) n->mode = self.st_mode & 07777;
    return 0;
}

/* The initial state: everything in BACKING is durable. */
static void adopt_tree(int fd, struct node *dir) {
    record_dir(dir, fd);
    for (size_t i = 0; i < dir->nents; i++) {
        struct node *c = dir->ents[i].node;
        if (c->visited) continue;
        c->visited = 1;
        if (c->kind == S_IFDIR) {
            int sub = openat(fd, dir->ents[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) die("open directory");
            adopt_tree(sub, c);
            close(sub);
        } else if (c->kind == S_IFREG) {
            int f = openat(fd, dir->ents[i].name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (f < 0) die("open file");
            c->has_data = 0;
            if (sync_file(c, f) != 0) die("copy to the durable directory");
            close(f);
        }
    }
}

/* ---- power loss ---- */

static int remove_tree(int fd) {
    int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0) return -errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) { close(dup_fd); return -errno; }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) { rc = -errno; continue; }
            int r = remove_tree(sub);
            if (r) rc = r;
            close(sub);
            if (unlinkat(fd, e->d_name, AT_REMOVEDIR) != 0) rc = -errno;
        } else if (unlinkat(fd, e->d_name, 0) != 0) rc = -errno;
    }
    closedir(d);
    return rc;
}

struct tally { unsigned long files, dirs, links, other, skipped; };

static int build_dir(struct node *dir, int fd, const char *path, struct tally *t) {
    for (size_t i = 0; i < dir->nents; i++) {
        struct node *c = dir->ents[i].node;
        const char *name = dir->ents[i].name;
        char child[PATH_MAX];
        snprintf(child, sizeof child, "%s%s%s", path, *path ? "/" : "", name);
        mode_t mode = c->mode ? c->mode : 0644;
        switch (c->kind) {
        case S_IFDIR: {
            if (c->visited) { t->skipped++; break; } /* one directory, one place */
            c->visited = 1;
            if (mkdirat(fd, name, mode) != 0) return -errno;
            int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) return -errno;
            int r = build_dir(c, sub, child, t);
            close(sub);
            if (r) return r;
            t->dirs++;
            break;
        }
        case S_IFREG: {
            if (c->built) {
                if (linkat(g.bfd, c->built, fd, name, 0) != 0) return -errno;
                t->links++;
                break;
            }
            int f = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
            if (f < 0) return -errno;
            int r = 0;
            if (c->has_data) {
                char dn[32];
                durable_name(c, dn, sizeof dn);
                int src = openat(g.dfd, dn, O_RDONLY | O_CLOEXEC);
                struct stat st;
                if (src < 0 || fstat(src, &st) != 0) r = -errno;
                else r = copy_range(src, f, 0, st.st_size);
                if (src >= 0) close(src);
            }
            if (fchmod(f, mode) != 0 && !r) r = -errno;
            close(f);
            if (r) return r;
            c->built = strdup(child);
            t->files++;
            break;
        }
        case S_IFLNK:
            if (symlinkat(c->target ? c->target : "", fd, name) != 0) return -errno;
            t->other++;
            break;
        case S_IFSOCK:
            t->skipped++; /* a socket's name is of no use after a reboot */
            break;
        default:
            if (mknodat(fd, name, c->kind | mode, 0) != 0) return -errno;
            t->other++;
            break;
        }
    }
    return 0;
}

static int power_loss(void) {
    g.powerlosses++;
    int rc = remove_tree(g.bfd);
    if (rc) { logmsg("power loss: emptying %s: %s", g.backing, strerror(-rc)); return rc; }
    for (struct node *n = g.all; n; n = n->anext) { n->visited = 0; free(n->built); n->built = NULL; }
    struct tally t = {0};
    g.root->visited = 1;
    rc = build_dir(g.root, g.bfd, "", &t);
    if (rc) { logmsg("power loss: rebuilding %s: %s", g.backing, strerror(-rc)); return rc; }
    if (g.root->mode) fchmod(g.bfd, g.root->mode);
    logmsg("power loss: %s now holds the durable state: %lu files, %lu hard links, %lu directories, %lu other, %lu skipped "
           "(%llu writes, %llu fsyncs, %llu directory fsyncs served)",
           g.backing, t.files, t.links, t.dirs, t.other, t.skipped, g.writes, g.fsyncs, g.fsyncdirs);
    return 0;
}

/* ---- file system operations ---- */

static void *lz_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    cfg->use_ino = 1;
    cfg->hard_remove = 1;   /* unlink really unlinks, no .fuse_hidden files */
    cfg->nullpath_ok = 1;   /* ops on open-but-unlinked files get their handle */
    cfg->kernel_cache = 0;
    cfg->direct_io = 0;     /* keep the page cache: mmap must work */
    cfg->negative_timeout = 0;
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    return NULL;
}

static void lz_destroy(void *private_data) {
    (void)private_data;
    if (g.durable_owned) {
        remove_tree(g.dfd);
        rmdir(g.durable);
    }
}

static int ctl_stat(struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFREG | 0600;
    st->st_nlink = 1;
    st->st_ino = CTL_INO;
    return 0;
}

static int lz_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    ALIVE();
    struct handle *h = H(fi);
    if ((h && h->ctl) || is_ctl(path)) return ctl_stat(st);
    if (h) return fstat(h->fd, st) ? -errno : 0;
    return fstatat(g.bfd, rel(path), st, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int lz_access(const char *path, int mask) {
    ALIVE();
    if (is_ctl(path)) return 0;
    return faccessat(g.bfd, rel(path), mask, 0) ? -errno : 0;
}

static int lz_readlink(const char *path, char *buf, size_t size) {
    ALIVE();
    ssize_t n = readlinkat(g.bfd, rel(path), buf, size - 1);
    if (n < 0) return -errno;
    buf[n] = 0;
    return 0;
}

/* After a name was created: the node of the new inode. */
static int adopt_new(const char *path, const char *target) {
    struct stat st;
    if (fstatat(g.bfd, rel(path), &st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
    struct node *n = new_node(st.st_ino, st.st_mode);
    if (target) n->target = strdup(target);
    g.creates++;
    return 0;
}

static int lz_mknod(const char *path, mode_t mode, dev_t rdev) {
    ALIVE();
    if (is_ctl(path)) return -EEXIST;
    if (mknodat(g.bfd, rel(path), mode, rdev) != 0) return -errno;
    return adopt_new(path, NULL);
}

static int lz_mkdir(const char *path, mode_t mode) {
    ALIVE();
    if (is_ctl(path)) return -EEXIST;
    if (mkdirat(g.bfd, rel(path), mode) != 0) return -errno;
    return adopt_new(path, NULL);
}

static int lz_symlink(const char *target, const char *path) {
    ALIVE();
    if (is_ctl(path)) return -EEXIST;
    if (symlinkat(target, g.bfd, rel(path)) != 0) return -errno;
    return adopt_new(path, target);
}

static int lz_unlink(const char *path) {
    ALIVE();
    if (is_ctl(path)) return -EPERM;
    if (unlinkat(g.bfd, rel(path), 0) != 0) return -errno;
    g.unlinks++;
    return 0;
}

static int lz_rmdir(const char *path) {
    ALIVE();
    if (unlinkat(g.bfd, rel(path), AT_REMOVEDIR) != 0) return -errno;
    g.unlinks++;
    return 0;
}

static int lz_rename(const char *from, const char *to, unsigned int flags) {
    ALIVE();
    if (is_ctl(from) || is_ctl(to)) return -EPERM;
    if (renameat2(g.bfd, rel(from), g.bfd, rel(to), flags) != 0) return -errno;
    g.renames++;
    return 0;
}

static int lz_link(const char *from, const char *to) {
    ALIVE();
    if (is_ctl(from) || is_ctl(to)) return -EPERM;
    if (linkat(g.bfd, rel(from), g.bfd, rel(to), 0) != 0) return -errno;
    return 0;
}

static int lz_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
    ALIVE();
    struct handle *h = H(fi);
    if ((h && h->ctl) || is_ctl(path)) return -EPERM;
    if (h) return fchmod(h->fd, mode) ? -errno : 0;
    return fchmodat(g.bfd, rel(path), mode, 0) ? -errno : 0;
}

static int lz_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi) {
    ALIVE();
    struct handle *h = H(fi);
    if ((h && h->ctl) || is_ctl(path)) return -EPERM;
    if (h) return fchown(h->fd, uid, gid) ? -errno : 0;
    return fchownat(g.bfd, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int lz_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    ALIVE();
    struct handle *h = H(fi);
    if ((h && h->ctl) || is_ctl(path)) return 0;
    struct stat st;
    int fd = h ? h->fd : openat(g.bfd, rel(path), O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = 0;
    if (fstat(fd, &st) != 0 || ftruncate(fd, size) != 0) rc = -errno;
    else {
        struct node *n = h && h->node ? h->node : node_of(&st);
        mark_dirty(n, st.st_size < size ? st.st_size : size, st.st_size < size ? size : st.st_size);
    }
    if (!h) close(fd);
    return rc;
}

static int lz_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
    ALIVE();
    struct handle *h = H(fi);
    if ((h && h->ctl) || is_ctl(path)) return 0;
    if (h) return futimens(h->fd, tv) ? -errno : 0;
    return utimensat(g.bfd, rel(path), tv, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int open_common(const char *path, struct fuse_file_info *fi, int create, mode_t mode) {
    if (is_ctl(path)) {
        if (create && (fi->flags & O_EXCL)) return -EEXIST;
        struct handle *h = calloc(1, sizeof *h);
        if (!h) return -ENOMEM;
        h->fd = -1;
        h->ctl = 1;
        fi->fh = (uintptr_t)h;
        fi->direct_io = 1;
        return 0;
    }
    struct stat before;
    int existed = fstatat(g.bfd, rel(path), &before, AT_SYMLINK_NOFOLLOW) == 0;
    /* Write-only opens are read-write underneath: fsync copies from this descriptor. */
    int flags = fi->flags | O_CLOEXEC;
    if ((flags & O_ACCMODE) == O_WRONLY) flags = (flags & ~O_ACCMODE) | O_RDWR;
    if (create) flags |= O_CREAT;
    int fd = openat(g.bfd, rel(path), flags, mode);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0) { int e = -errno; close(fd); return e; }
    struct node *n;
    if (!existed || before.st_ino != st.st_ino) { n = new_node(st.st_ino, st.st_mode); g.creates++; }
    else n = node_of(&st);
    if ((fi->flags & O_TRUNC) && existed && before.st_ino == st.st_ino) mark_dirty(n, 0, before.st_size);
    struct handle *h = calloc(1, sizeof *h);
    if (!h) { close(fd); return -ENOMEM; }
    h->fd = fd;
    h->node = n;
    fi->fh = (uintptr_t)h;
    return 0;
}

static int lz_open(const char *path, struct fuse_file_info *fi) {
    ALIVE();
    return open_common(path, fi, 0, 0);
}

static int lz_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    ALIVE();
    return open_common(path, fi, 1, mode);
}

static char ctl_text[1024];

static int lz_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    ALIVE();
    struct handle *h = H(fi);
    if (h->ctl) {
        int len = snprintf(ctl_text, sizeof ctl_text,
                           "writes %llu\nbytes_written %llu\nfsyncs %llu\nfsyncdirs %llu\ncreates %llu\nrenames %llu\nunlinks %llu\nnodes %llu\n",
                           g.writes, g.bytes_written, g.fsyncs, g.fsyncdirs, g.creates, g.renames, g.unlinks,
                           (unsigned long long)g.next_id);
        if (off >= len) return 0;
        size_t n = (size_t)(len - off) < size ? (size_t)(len - off) : size;
        memcpy(buf, ctl_text + off, n);
        return (int)n;
    }
    ssize_t n = pread(h->fd, buf, size, off);
    return n < 0 ? -errno : (int)n;
}

static int lz_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    ALIVE();
    struct handle *h = H(fi);
    if (h->ctl) {
        char cmd[64];
        size_t n = size < sizeof cmd - 1 ? size : sizeof cmd - 1;
        memcpy(cmd, buf, n);
        cmd[n] = 0;
        while (n > 0 && (cmd[n - 1] == '\n' || cmd[n - 1] == ' ' || cmd[n - 1] == '\r')) cmd[--n] = 0;
        if (strcmp(cmd, "powerloss") != 0) return -EINVAL;
        int rc = power_loss();
        g.dead = 1;
        fuse_exit(fuse_get_context()->fuse);
        return rc ? rc : (int)size;
    }
    if (fcntl(h->fd, F_GETFL) & O_APPEND) {
        struct stat st;
        if (fstat(h->fd, &st) != 0) return -errno;
        off = st.st_size;
    }
    ssize_t n = pwrite(h->fd, buf, size, off);
    if (n < 0) return -errno;
    mark_dirty(h->node, off, off + n);
    g.writes++;
    g.bytes_written += (unsigned long long)n;
    return (int)n;
}

static int lz_statfs(const char *path, struct statvfs *st) {
    (void)path;
    ALIVE();
    return fstatvfs(g.bfd, st) ? -errno : 0;
}

static int lz_flush(const char *path, struct fuse_file_info *fi) {
    (void)path; (void)fi;
    return 0;
}

static int lz_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    struct handle *h = H(fi);
    if (h) {
        if (h->fd >= 0) close(h->fd);
        free(h);
    }
    return 0;
}

static int lz_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path; (void)datasync;
    ALIVE();
    struct handle *h = H(fi);
    if (h->ctl) return 0;
    return sync_file(h->node, h->fd);
}

static int lz_fallocate(const char *path, int mode, off_t off, off_t len, struct fuse_file_info *fi) {
    (void)path;
    ALIVE();
    struct handle *h = H(fi);
    if (h->ctl) return -EOPNOTSUPP;
    if (fallocate(h->fd, mode, off, len) != 0) return -errno;
    mark_dirty(h->node, off, off + len);
    return 0;
}

static int lz_opendir(const char *path, struct fuse_file_info *fi) {
    ALIVE();
    int fd = openat(g.bfd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0) { int e = -errno; close(fd); return e; }
    struct handle *h = calloc(1, sizeof *h);
    if (!h) { close(fd); return -ENOMEM; }
    h->fd = fd;
    h->node = node_of(&st);
    fi->fh = (uintptr_t)h;
    return 0;
}

static int lz_readdir(const char *path, void *buf, fuse_fill_dir_t filler, off_t off,
                      struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    (void)path; (void)off; (void)flags;
    ALIVE();
    struct handle *h = H(fi);
    int dup_fd = openat(h->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dup_fd < 0) return -errno;
    DIR *d = fdopendir(dup_fd);
    if (!d) { int e = -errno; close(dup_fd); return e; }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (h->node == g.root && !strcmp(e->d_name, CTL_NAME)) continue;
        struct stat st;
        memset(&st, 0, sizeof st);
        st.st_ino = e->d_ino;
        st.st_mode = (mode_t)DTTOIF(e->d_type);
        if (filler(buf, e->d_name, &st, 0, 0)) break;
    }
    closedir(d);
    return 0;
}

static int lz_releasedir(const char *path, struct fuse_file_info *fi) {
    return lz_release(path, fi);
}

static int lz_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path; (void)datasync;
    ALIVE();
    struct handle *h = H(fi);
    g.fsyncdirs++;
    return record_dir(h->node, h->fd);
}

static const struct fuse_operations ops = {
    .init = lz_init,
    .destroy = lz_destroy,
    .getattr = lz_getattr,
    .access = lz_access,
    .readlink = lz_readlink,
    .mknod = lz_mknod,
    .mkdir = lz_mkdir,
    .symlink = lz_symlink,
    .unlink = lz_unlink,
    .rmdir = lz_rmdir,
    .rename = lz_rename,
    .link = lz_link,
    .chmod = lz_chmod,
    .chown = lz_chown,
    .truncate = lz_truncate,
    .utimens = lz_utimens,
    .open = lz_open,
    .create = lz_create,
    .read = lz_read,
    .write = lz_write,
    .statfs = lz_statfs,
    .flush = lz_flush,
    .release = lz_release,
    .fsync = lz_fsync,
    .fallocate = lz_fallocate,
    .opendir = lz_opendir,
    .readdir = lz_readdir,
    .releasedir = lz_releasedir,
    .fsyncdir = lz_fsyncdir,
    /* no .lock / .flock: the kernel keeps flock and fcntl locks itself */
};

/* --exit-with-parent: a test runner that dies must not leave a mount behind.
 * SIGTERM goes to the thread in the FUSE loop, whose read of /dev/fuse it
 * interrupts (libfuse's handler then ends the loop and unmounts). */
static pid_t parent;
static pthread_t main_thread;
static void *watch_parent(void *arg) {
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (getppid() == parent) usleep(200000);
    logmsg("parent %d is gone: unmounting", (int)parent);
    pthread_kill(main_thread, SIGTERM);
    return NULL;
}

static void usage(void) {
    fprintf(stderr, "usage: lazyfs [--debug] [--exit-with-parent] [--durable DIR] BACKING MOUNTPOINT\n");
    exit(2);
}

int main(int argc, char **argv) {
    const char *backing = NULL, *mountpoint = NULL, *durable = NULL;
    int watch = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--debug")) g.debug = 1;
        else if (!strcmp(argv[i], "--exit-with-parent")) watch = 1;
        else if (!strcmp(argv[i], "--durable") && i + 1 < argc) durable = argv[++i];
        else if (argv[i][0] == '-') usage();
        else if (!backing) backing = argv[i];
        else if (!mountpoint) mountpoint = argv[i];
        else usage();
    }
    if (!backing || !mountpoint) usage();
    umask(0);
    g.backing = realpath(backing, NULL);
    if (!g.backing) die(backing);
    g.bfd = open(g.backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g.bfd < 0) die(g.backing);
    if (durable) {
        g.durable = strdup(durable);
        if (mkdir(durable, 0700) != 0 && errno != EEXIST) die(durable);
    } else {
        const char *tmp = getenv("TMPDIR");
        char tmpl[PATH_MAX];
        snprintf(tmpl, sizeof tmpl, "%s/lazyfs-durable-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(tmpl)) die("mkdtemp");
        g.durable = strdup(tmpl);
        g.durable_owned = 1;
    }
    g.dfd = open(g.durable, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (g.dfd < 0) die(g.durable);

    struct stat st;
    if (fstat(g.bfd, &st) != 0) die(g.backing);
    g.root = new_node(st.st_ino, st.st_mode);
    g.root->visited = 1;
    adopt_tree(g.bfd, g.root);
    for (struct node *n = g.all; n; n = n->anext) n->visited = 0;
    g.fsyncs = 0;

    if (watch) {
        parent = getppid();
        main_thread = pthread_self();
        pthread_t t;
        pthread_create(&t, NULL, watch_parent, NULL);
        pthread_detach(t);
    }

    char *fargv[8];
    int fargc = 0;
    fargv[fargc++] = argv[0];
    fargv[fargc++] = "-f";
    fargv[fargc++] = "-s";
    if (g.debug) fargv[fargc++] = "-d";
    fargv[fargc++] = "-o";
    fargv[fargc++] = "fsname=lazyfs,subtype=lazyfs,default_permissions,auto_unmount";
    fargv[fargc++] = (char *)mountpoint;
    fargv[fargc] = NULL;
    return fuse_main(fargc, fargv, &ops, NULL);
}
