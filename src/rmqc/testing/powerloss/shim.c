/* Power-loss shim (LD_PRELOAD) for rmqc tests: records which writes to one watched directory a
 * completed fsync/fdatasync (or an O_DSYNC/O_SYNC write) made durable, so that a test can replace
 * the directory with its durable image after SIGKILLing the process ("a power cut").
 * See docs/testing-power-loss.md for the model; rmqc.testing.powerloss builds and drives it.
 *
 * Environment:
 *   POWERLOSS_DIR     the watched directory (absolute, canonical); nothing outside it is modelled
 *   POWERLOSS_SHADOW  the shadow directory holding the durable image (outside POWERLOSS_DIR)
 *   POWERLOSS_UNSYNCED_NAME  (mutant) fsync/fdatasync of files or directories of this base name
 *                            make nothing durable
 *
 * Shadow layout (shared by every process of the directory, guarded by flock on SHADOW/lock):
 *   ids/<ino>      the id of the file or directory that has inode <ino> now (ids are never reused)
 *   data/<id>      the durable contents of file <id> (missing: empty)
 *   dirs/<id>      the durable entries of directory <id>, lines "f|d TAB id TAB name"
 *   dirty/<ino>    the writes and truncations of inode <ino> since its last sync (24-byte records)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAX_FDS 65536
#define REC_WRITE 1u
#define REC_TRUNCATE 2u

enum { FD_UNKNOWN = 0, FD_WATCHED = 1, FD_IGNORED = 2 };

struct fd_info {
    int state;
    int dsync;     /* opened O_DSYNC or O_SYNC: each write is durable when it returns */
    int is_dir;
    ino_t ino;
    char *path;    /* canonical path when watched */
};

struct record {
    uint64_t kind, a, b; /* REC_WRITE: bytes [a, b); REC_TRUNCATE: size a */
};

static struct fd_info fds[MAX_FDS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char watch_dir[PATH_MAX];
static size_t watch_len;
static char shadow_dir[1024]; /* short enough that every shadow path fits in PATH_MAX */
static char unsynced_name[NAME_MAX + 1];
static int enabled;
static int lock_fd = -1;
static unsigned long id_counter;

/* the real functions */
static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_pwritev)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev64)(int, const struct iovec *, int, off_t);
static ssize_t (*real_pwritev2)(int, const struct iovec *, int, off_t, int);
static ssize_t (*real_pwritev64v2)(int, const struct iovec *, int, off_t, int);
static int (*real_ftruncate)(int, off_t);
static int (*real_ftruncate64)(int, off_t);
static int (*real_truncate)(const char *, off_t);
static int (*real_truncate64)(const char *, off_t);
static int (*real_fallocate)(int, int, off_t, off_t);
static int (*real_fallocate64)(int, int, off_t, off_t);
static int (*real_posix_fallocate)(int, off_t, off_t);
static int (*real_posix_fallocate64)(int, off_t, off_t);
static int (*real_fsync)(int);
static int (*real_fdatasync)(int);
static int (*real_close)(int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_dup3)(int, int, int);
static int (*real_rename)(const char *, const char *);
static int (*real_renameat)(int, const char *, int, const char *);
static int (*real_renameat2)(int, const char *, int, const char *, unsigned int);
static int (*real_unlink)(const char *);
static int (*real_unlinkat)(int, const char *, int);
static int (*real_rmdir)(const char *);
static int (*real_mkdir)(const char *, mode_t);
static int (*real_mkdirat)(int, const char *, mode_t);

#define RESOLVE(name) \
    do { if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name); } while (0)

static void resolve_all(void)
{
    RESOLVE(open); RESOLVE(open64); RESOLVE(openat); RESOLVE(openat64);
    RESOLVE(write); RESOLVE(pwrite); RESOLVE(pwrite64); RESOLVE(writev);
    RESOLVE(pwritev); RESOLVE(pwritev64); RESOLVE(pwritev2); RESOLVE(pwritev64v2);
    RESOLVE(ftruncate); RESOLVE(ftruncate64); RESOLVE(truncate); RESOLVE(truncate64);
    RESOLVE(fallocate); RESOLVE(fallocate64); RESOLVE(posix_fallocate); RESOLVE(posix_fallocate64);
    RESOLVE(fsync); RESOLVE(fdatasync); RESOLVE(close); RESOLVE(dup); RESOLVE(dup2); RESOLVE(dup3);
    RESOLVE(rename); RESOLVE(renameat); RESOLVE(renameat2); RESOLVE(unlink); RESOLVE(unlinkat);
    RESOLVE(rmdir); RESOLVE(mkdir); RESOLVE(mkdirat);
}

static void after_fork_in_child(void)
{
    /* the inherited descriptor shares its flock with the parent: open our own when needed */
    lock_fd = -1;
    pthread_mutex_init(&mu, NULL);
}

__attribute__((constructor)) static void init(void)
{
    resolve_all();
    const char *dir = getenv("POWERLOSS_DIR");
    const char *shadow = getenv("POWERLOSS_SHADOW");
    const char *unsynced = getenv("POWERLOSS_UNSYNCED_NAME");
    if (!dir || !shadow || !*dir || !*shadow) return;
    if (strlen(dir) >= sizeof(watch_dir) || strlen(shadow) >= sizeof(shadow_dir)) return;
    strcpy(watch_dir, dir);
    watch_len = strlen(watch_dir);
    while (watch_len > 1 && watch_dir[watch_len - 1] == '/') watch_dir[--watch_len] = '\0';
    strcpy(shadow_dir, shadow);
    if (unsynced && strlen(unsynced) < sizeof(unsynced_name)) strcpy(unsynced_name, unsynced);
    pthread_atfork(NULL, NULL, after_fork_in_child);
    enabled = 1;
}

/* ----- helpers (callers hold mu unless said otherwise) ----- */

static void die(const char *what)
{
    /* the model can no longer be trusted: fail loudly rather than report a wrong durable image */
    char message[512];
    int n = snprintf(message, sizeof message, "powerloss shim: %s failed: %s\n", what, strerror(errno));
    if (n > 0) (void)!real_write(2, message, (size_t)n);
    abort();
}

static int under_watch(const char *path)
{
    return strncmp(path, watch_dir, watch_len) == 0 && (path[watch_len] == '\0' || path[watch_len] == '/');
}

static int fd_path(int fd, char *out, size_t size)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, out, size - 1);
    if (n < 0) return -1;
    out[n] = '\0';
    return 0;
}

static void shadow_path(char *out, const char *kind, const char *name)
{
    snprintf(out, PATH_MAX, "%s/%s/%s", shadow_dir, kind, name);
}

static void lock_shadow(void)
{
    if (lock_fd < 0) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/lock", shadow_dir);
        lock_fd = real_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0) die("opening the shadow lock");
    }
    while (flock(lock_fd, LOCK_EX) != 0)
        if (errno != EINTR) die("flock");
}

static void unlock_shadow(void)
{
    flock(lock_fd, LOCK_UN);
}

static char *read_all(const char *path, size_t *length)
{
    int fd = real_open(path, O_RDONLY | O_CLOEXEC);
    *length = 0;
    if (fd < 0) {
        if (errno == ENOENT) return NULL;
        die("opening a shadow file");
    }
    size_t capacity = 4096;
    char *buffer = malloc(capacity + 1);
    if (!buffer) die("malloc");
    for (;;) {
        if (*length == capacity) {
            capacity *= 2;
            buffer = realloc(buffer, capacity + 1);
            if (!buffer) die("realloc");
        }
        ssize_t n = read(fd, buffer + *length, capacity - *length);
        if (n < 0) { if (errno == EINTR) continue; die("reading a shadow file"); }
        if (n == 0) break;
        *length += (size_t)n;
    }
    buffer[*length] = '\0';
    real_close(fd);
    return buffer;
}

static void write_all(int fd, const char *data, size_t length, const char *what)
{
    while (length > 0) {
        ssize_t n = real_write(fd, data, length);
        if (n < 0) { if (errno == EINTR) continue; die(what); }
        data += n;
        length -= (size_t)n;
    }
}

static void replace_file(const char *path, const char *data, size_t length)
{
    char temporary[PATH_MAX + 32];
    snprintf(temporary, sizeof temporary, "%s.%d.tmp", path, getpid());
    int fd = real_open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die("creating a shadow file");
    write_all(fd, data, length, "writing a shadow file");
    real_close(fd);
    if (real_rename(temporary, path) != 0) die("renaming a shadow file");
}

/* The id of the file or directory with inode `ino`, made up (and recorded) on first use. Holds the
 * shadow lock. */
static void id_of(ino_t ino, char *id, size_t size)
{
    char path[PATH_MAX], name[32];
    snprintf(name, sizeof name, "%lu", (unsigned long)ino);
    shadow_path(path, "ids", name);
    size_t length;
    char *recorded = read_all(path, &length);
    if (recorded && length > 0 && length < size) {
        memcpy(id, recorded, length);
        id[length] = '\0';
        free(recorded);
        return;
    }
    free(recorded);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(id, size, "%lu.%d.%lu.%lld%09ld", (unsigned long)ino, getpid(), ++id_counter,
             (long long)now.tv_sec, now.tv_nsec);
    replace_file(path, id, strlen(id));
}

/* Inode `ino` left the namespace (its last name removed) or is new: the next file or directory
 * with that inode number gets a new id, and nothing recorded for the old one applies to it. */
static void retire_inode(ino_t ino)
{
    char path[PATH_MAX], name[32];
    snprintf(name, sizeof name, "%lu", (unsigned long)ino);
    lock_shadow();
    shadow_path(path, "ids", name);
    if (real_unlink(path) != 0 && errno != ENOENT) die("retiring an id");
    shadow_path(path, "dirty", name);
    if (real_unlink(path) != 0 && errno != ENOENT) die("retiring a dirty log");
    unlock_shadow();
}

static void append_records(ino_t ino, const struct record *records, size_t count)
{
    char path[PATH_MAX], name[32];
    snprintf(name, sizeof name, "%lu", (unsigned long)ino);
    shadow_path(path, "dirty", name);
    lock_shadow();
    int fd = real_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) die("opening a dirty log");
    write_all(fd, (const char *)records, count * sizeof *records, "appending to a dirty log");
    real_close(fd);
    unlock_shadow();
}

static void record(ino_t ino, uint64_t kind, uint64_t a, uint64_t b)
{
    struct record r = {kind, a, b};
    append_records(ino, &r, 1);
}

/* Classify an fd on first use: watched when it is a regular file or a directory under watch. */
static struct fd_info *watched(int fd)
{
    if (!enabled || fd < 0 || fd >= MAX_FDS) return NULL;
    struct fd_info *info = &fds[fd];
    if (info->state == FD_WATCHED) return info;
    if (info->state == FD_IGNORED) return NULL;
    struct stat st;
    char path[PATH_MAX];
    int saved = errno;
    info->state = FD_IGNORED;
    if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) &&
        fd_path(fd, path, sizeof path) == 0 && under_watch(path)) {
        int flags = fcntl(fd, F_GETFL);
        info->dsync = flags >= 0 && (flags & O_DSYNC) != 0;
        info->is_dir = S_ISDIR(st.st_mode);
        info->ino = st.st_ino;
        free(info->path);
        info->path = strdup(path);
        info->state = FD_WATCHED;
    }
    errno = saved;
    return info->state == FD_WATCHED ? info : NULL;
}

static void forget(int fd)
{
    if (fd < 0 || fd >= MAX_FDS) return;
    free(fds[fd].path);
    memset(&fds[fd], 0, sizeof fds[fd]);
}

static int compare_records(const void *left, const void *right)
{
    const struct record *a = left, *b = right;
    return a->a < b->a ? -1 : a->a > b->a;
}

static void copy_range(int from, int to, uint64_t start, uint64_t end)
{
    static char buffer[1 << 16];
    while (start < end) {
        size_t want = end - start < sizeof buffer ? (size_t)(end - start) : sizeof buffer;
        ssize_t n = pread(from, buffer, want, (off_t)start);
        if (n < 0) { if (errno == EINTR) continue; die("reading a watched file"); }
        if (n == 0) break;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = real_pwrite(to, buffer + done, (size_t)(n - done), (off_t)(start + (uint64_t)done));
            if (w < 0) { if (errno == EINTR) continue; die("writing the durable image"); }
            done += w;
        }
        start += (uint64_t)n;
    }
}

static int open_image(const char *id)
{
    char path[PATH_MAX];
    shadow_path(path, "data", id);
    int fd = real_open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) die("opening a durable image");
    return fd;
}

static int reopen_for_reading(int fd)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int reader = real_open(link, O_RDONLY | O_CLOEXEC);
    if (reader < 0) die("reopening a watched file");
    return reader;
}

/* fsync/fdatasync of a regular file: its durable image becomes its contents now. */
static void sync_file(int fd, struct fd_info *info)
{
    char id[128], path[PATH_MAX], name[32];
    snprintf(name, sizeof name, "%lu", (unsigned long)info->ino);
    lock_shadow();
    id_of(info->ino, id, sizeof id);
    shadow_path(path, "dirty", name);
    size_t length;
    char *log = read_all(path, &length);
    size_t count = length / sizeof(struct record);
    struct record *records = (struct record *)log;
    struct stat st;
    if (fstat(fd, &st) != 0) die("fstat");
    uint64_t size = (uint64_t)st.st_size, smallest = UINT64_MAX;
    int image = open_image(id), reader = reopen_for_reading(fd);
    for (size_t i = 0; i < count; i++)
        if (records[i].kind == REC_TRUNCATE && records[i].a < smallest) smallest = records[i].a;
    if (smallest != UINT64_MAX && real_ftruncate(image, (off_t)smallest) != 0) die("ftruncate");
    if (real_ftruncate(image, (off_t)size) != 0) die("ftruncate");
    /* copy each written range once: sort, merge, clip to the size */
    size_t writes = 0;
    for (size_t i = 0; i < count; i++)
        if (records[i].kind == REC_WRITE) records[writes++] = records[i];
    qsort(records, writes, sizeof *records, compare_records);
    for (size_t i = 0; i < writes;) {
        uint64_t start = records[i].a, end = records[i].b;
        for (i++; i < writes && records[i].a <= end; i++)
            if (records[i].b > end) end = records[i].b;
        if (end > size) end = size;
        if (start < end) copy_range(reader, image, start, end);
    }
    free(log);
    real_close(reader);
    real_close(image);
    if (real_unlink(path) != 0 && errno != ENOENT) die("clearing a dirty log");
    unlock_shadow();
}

/* An O_DSYNC/O_SYNC write returned: these bytes (and the size they make) are durable. */
static void sync_written_range(int fd, struct fd_info *info, uint64_t start, uint64_t end)
{
    char id[128];
    lock_shadow();
    id_of(info->ino, id, sizeof id);
    int image = open_image(id), reader = reopen_for_reading(fd);
    struct stat st;
    if (fstat(image, &st) != 0) die("fstat");
    if ((uint64_t)st.st_size < end && real_ftruncate(image, (off_t)end) != 0) die("ftruncate");
    copy_range(reader, image, start, end);
    real_close(reader);
    real_close(image);
    unlock_shadow();
}

/* fsync of a directory: its durable entries become its entries now. */
static void sync_directory(int fd, struct fd_info *info)
{
    char id[128], path[PATH_MAX];
    int listing_fd = reopen_for_reading(fd);
    DIR *dir = fdopendir(listing_fd);
    if (!dir) die("fdopendir");
    size_t capacity = 4096, length = 0;
    char *listing = malloc(capacity);
    if (!listing) die("malloc");
    lock_shadow();
    id_of(info->ino, id, sizeof id);
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        const char *name = entry->d_name;
        struct stat st;
        if (!strcmp(name, ".") || !strcmp(name, "..") || strpbrk(name, "\t\n")) continue;
        if (fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* removed meanwhile */
        if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) continue;
        char entry_id[128];
        id_of(st.st_ino, entry_id, sizeof entry_id);
        size_t need = strlen(name) + strlen(entry_id) + 8;
        if (length + need > capacity) {
            while (length + need > capacity) capacity *= 2;
            listing = realloc(listing, capacity);
            if (!listing) die("realloc");
        }
        length += (size_t)sprintf(listing + length, "%c\t%s\t%s\n", S_ISDIR(st.st_mode) ? 'd' : 'f',
                                  entry_id, name);
    }
    closedir(dir);
    shadow_path(path, "dirs", id);
    replace_file(path, listing, length);
    unlock_shadow();
    free(listing);
}

/* the mutant: a file (or directory) of this name is never made durable by its fsync */
static int sync_is_ignored(const struct fd_info *info)
{
    if (!unsynced_name[0]) return 0;
    const char *slash = strrchr(info->path, '/');
    return strcmp(slash ? slash + 1 : info->path, unsynced_name) == 0;
}

/* What a file name will remove: its inode, when the name is under watch and its last link. */
static int victim(int dirfd, const char *pathname, ino_t *ino)
{
    if (!enabled) return 0;
    int saved = errno, found = 0;
    int fd = real_openat(dirfd, pathname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        struct stat st;
        char path[PATH_MAX];
        if (fstat(fd, &st) == 0 && (S_ISDIR(st.st_mode) || (S_ISREG(st.st_mode) && st.st_nlink <= 1)) &&
            fd_path(fd, path, sizeof path) == 0 && under_watch(path)) {
            *ino = st.st_ino;
            found = 1;
        }
        real_close(fd);
    }
    errno = saved;
    return found;
}

/* ----- open ----- */

static int exists_at(int dirfd, const char *pathname)
{
    struct stat st;
    int saved = errno, result = fstatat(dirfd, pathname, &st, 0) == 0 || errno != ENOENT;
    errno = saved;
    return result;
}

static int after_open(int fd, int flags, int existed)
{
    if (fd < 0 || !enabled) return fd;
    pthread_mutex_lock(&mu);
    forget(fd);
    if (flags & (O_CREAT | O_TRUNC)) {
        struct fd_info *info = watched(fd);
        if (info && !info->is_dir) {
            int saved = errno;
            if (!existed)
                retire_inode(info->ino); /* a new file: nothing recorded under its inode number is its */
            else if (flags & O_TRUNC)
                record(info->ino, REC_TRUNCATE, 0, 0);
            errno = saved;
        }
    }
    pthread_mutex_unlock(&mu);
    return fd;
}

static mode_t mode_argument(int flags, va_list args)
{
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(args, int) : 0;
}

#define OPEN_BODY(call_real, dirfd)                                              \
    resolve_all();                                                               \
    va_list args;                                                                \
    va_start(args, flags);                                                       \
    mode_t mode = mode_argument(flags, args);                                    \
    va_end(args);                                                                \
    int existed = !(enabled && (flags & O_CREAT)) || exists_at(dirfd, pathname); \
    return after_open(call_real, flags, existed);

int open(const char *pathname, int flags, ...) { OPEN_BODY(real_open(pathname, flags, mode), AT_FDCWD) }
int open64(const char *pathname, int flags, ...) { OPEN_BODY(real_open64(pathname, flags, mode), AT_FDCWD) }
int openat(int dirfd, const char *pathname, int flags, ...) { OPEN_BODY(real_openat(dirfd, pathname, flags, mode), dirfd) }
int openat64(int dirfd, const char *pathname, int flags, ...) { OPEN_BODY(real_openat64(dirfd, pathname, flags, mode), dirfd) }
int __open_2(const char *pathname, int flags) { return open(pathname, flags); }
int __open64_2(const char *pathname, int flags) { return open64(pathname, flags); }
int __openat_2(int dirfd, const char *pathname, int flags) { return openat(dirfd, pathname, flags); }
int __openat64_2(int dirfd, const char *pathname, int flags) { return openat64(dirfd, pathname, flags); }

/* ----- writes ----- */

static void after_write(int fd, struct fd_info *info, ssize_t written, off_t offset)
{
    if (written <= 0) return;
    int saved = errno;
    if (offset < 0) offset = lseek(fd, 0, SEEK_CUR) - written; /* write()/writev(), O_APPEND too */
    record(info->ino, REC_WRITE, (uint64_t)offset, (uint64_t)offset + (uint64_t)written);
    if (info->dsync) sync_written_range(fd, info, (uint64_t)offset, (uint64_t)offset + (uint64_t)written);
    errno = saved;
}

/* a descriptor known not to be watched (a socket, a pipe, a file elsewhere) skips the mutex */
static int known_unwatched(int fd)
{
    return fd >= 0 && fd < MAX_FDS && __atomic_load_n(&fds[fd].state, __ATOMIC_RELAXED) == FD_IGNORED;
}

#define WRITE_BODY(call_real, offset)                    \
    resolve_all();                                       \
    if (!enabled || known_unwatched(fd)) return call_real; \
    pthread_mutex_lock(&mu);                             \
    struct fd_info *info = watched(fd);                  \
    if (!info) {                                         \
        pthread_mutex_unlock(&mu);                       \
        return call_real;                                \
    }                                                    \
    ssize_t written = call_real;                         \
    after_write(fd, info, written, offset);              \
    pthread_mutex_unlock(&mu);                           \
    return written;

ssize_t write(int fd, const void *buf, size_t count) { WRITE_BODY(real_write(fd, buf, count), -1) }
ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) { WRITE_BODY(real_pwrite(fd, buf, count, offset), offset) }
ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) { WRITE_BODY(real_pwrite64(fd, buf, count, offset), offset) }
ssize_t writev(int fd, const struct iovec *iov, int n) { WRITE_BODY(real_writev(fd, iov, n), -1) }
ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t offset) { WRITE_BODY(real_pwritev(fd, iov, n, offset), offset) }
ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t offset) { WRITE_BODY(real_pwritev64(fd, iov, n, offset), offset) }
ssize_t pwritev2(int fd, const struct iovec *iov, int n, off_t offset, int flags)
{
    /* RWF_DSYNC/RWF_SYNC per write are not modelled (rmqc and LMDB do not use them) */
    WRITE_BODY(real_pwritev2(fd, iov, n, offset, flags), offset)
}
ssize_t pwritev64v2(int fd, const struct iovec *iov, int n, off_t offset, int flags)
{
    WRITE_BODY(real_pwritev64v2(fd, iov, n, offset, flags), offset)
}

/* ----- sizes ----- */

static int after_resize(int fd, int result, uint64_t kind, uint64_t a, uint64_t b)
{
    if (result != 0) return result;
    pthread_mutex_lock(&mu);
    struct fd_info *info = watched(fd);
    if (info && !info->is_dir) {
        int saved = errno;
        record(info->ino, kind, a, b);
        errno = saved;
    }
    pthread_mutex_unlock(&mu);
    return result;
}

int ftruncate(int fd, off_t length) { resolve_all(); return after_resize(fd, real_ftruncate(fd, length), REC_TRUNCATE, (uint64_t)length, 0); }
int ftruncate64(int fd, off_t length) { resolve_all(); return after_resize(fd, real_ftruncate64(fd, length), REC_TRUNCATE, (uint64_t)length, 0); }
/* fallocate may punch holes or zero ranges: the range is (re)copied at the next sync */
int fallocate(int fd, int mode, off_t offset, off_t len) { resolve_all(); return after_resize(fd, real_fallocate(fd, mode, offset, len), REC_WRITE, (uint64_t)offset, (uint64_t)(offset + len)); }
int fallocate64(int fd, int mode, off_t offset, off_t len) { resolve_all(); return after_resize(fd, real_fallocate64(fd, mode, offset, len), REC_WRITE, (uint64_t)offset, (uint64_t)(offset + len)); }
int posix_fallocate(int fd, off_t offset, off_t len) { resolve_all(); return after_resize(fd, real_posix_fallocate(fd, offset, len), REC_WRITE, (uint64_t)offset, (uint64_t)(offset + len)); }
int posix_fallocate64(int fd, off_t offset, off_t len) { resolve_all(); return after_resize(fd, real_posix_fallocate64(fd, offset, len), REC_WRITE, (uint64_t)offset, (uint64_t)(offset + len)); }

static int truncate_path(const char *pathname, off_t length, int result)
{
    if (result != 0 || !enabled) return result;
    int saved = errno;
    int fd = real_open(pathname, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        after_resize(fd, 0, REC_TRUNCATE, (uint64_t)length, 0);
        pthread_mutex_lock(&mu);
        forget(fd);
        pthread_mutex_unlock(&mu);
        real_close(fd);
    }
    errno = saved;
    return result;
}

int truncate(const char *pathname, off_t length) { resolve_all(); return truncate_path(pathname, length, real_truncate(pathname, length)); }
int truncate64(const char *pathname, off_t length) { resolve_all(); return truncate_path(pathname, length, real_truncate64(pathname, length)); }

/* ----- syncs ----- */

static int after_sync(int fd, int result)
{
    if (result != 0 || !enabled) return result;
    pthread_mutex_lock(&mu);
    struct fd_info *info = watched(fd);
    if (info && !sync_is_ignored(info)) {
        int saved = errno;
        if (info->is_dir)
            sync_directory(fd, info);
        else
            sync_file(fd, info);
        errno = saved;
    }
    pthread_mutex_unlock(&mu);
    return result;
}

/* fdatasync is modelled as fsync: the size it commits is all the metadata rmqc relies on */
int fsync(int fd) { resolve_all(); return after_sync(fd, real_fsync(fd)); }
int fdatasync(int fd) { resolve_all(); return after_sync(fd, real_fdatasync(fd)); }
/* sync_file_range, msync, syncfs and sync are not intercepted: they make nothing durable here
 * (sync_file_range never flushes the drive's cache or the metadata; rmqc does not use the others) */

/* ----- descriptors ----- */

int close(int fd)
{
    resolve_all();
    if (enabled && fd >= 0 && fd < MAX_FDS) {
        pthread_mutex_lock(&mu);
        forget(fd);
        pthread_mutex_unlock(&mu);
    }
    return real_close(fd);
}

static int fresh_fd(int fd)
{
    /* a descriptor number we have not classified yet (dup, dup2, dup3 results) */
    if (fd >= 0 && enabled) {
        pthread_mutex_lock(&mu);
        forget(fd);
        pthread_mutex_unlock(&mu);
    }
    return fd;
}

int dup(int oldfd) { resolve_all(); return fresh_fd(real_dup(oldfd)); }
int dup2(int oldfd, int newfd) { resolve_all(); return fresh_fd(real_dup2(oldfd, newfd)); }
int dup3(int oldfd, int newfd, int flags) { resolve_all(); return fresh_fd(real_dup3(oldfd, newfd, flags)); }

/* ----- names: durable only at an fsync of their directory, which reads the entries then ----- */

static int after_removal(int result, int found, ino_t ino)
{
    if (result == 0 && found) {
        int saved = errno;
        pthread_mutex_lock(&mu);
        retire_inode(ino);
        pthread_mutex_unlock(&mu);
        errno = saved;
    }
    return result;
}

int unlink(const char *pathname)
{
    resolve_all();
    ino_t ino = 0;
    int found = victim(AT_FDCWD, pathname, &ino);
    return after_removal(real_unlink(pathname), found, ino);
}

int unlinkat(int dirfd, const char *pathname, int flags)
{
    resolve_all();
    ino_t ino = 0;
    int found = victim(dirfd, pathname, &ino);
    return after_removal(real_unlinkat(dirfd, pathname, flags), found, ino);
}

int rmdir(const char *pathname)
{
    resolve_all();
    ino_t ino = 0;
    int found = victim(AT_FDCWD, pathname, &ino);
    return after_removal(real_rmdir(pathname), found, ino);
}

static int replaced(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, ino_t *ino)
{
    /* the rename's target, unless it is the source itself (a rename onto a hard link of itself) */
    if (!victim(newdirfd, newpath, ino)) return 0;
    struct stat st;
    int saved = errno, same = fstatat(olddirfd, oldpath, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == *ino;
    errno = saved;
    return !same;
}

int rename(const char *oldpath, const char *newpath)
{
    resolve_all();
    ino_t ino = 0;
    int found = replaced(AT_FDCWD, oldpath, AT_FDCWD, newpath, &ino);
    return after_removal(real_rename(oldpath, newpath), found, ino);
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    resolve_all();
    ino_t ino = 0;
    int found = replaced(olddirfd, oldpath, newdirfd, newpath, &ino);
    return after_removal(real_renameat(olddirfd, oldpath, newdirfd, newpath), found, ino);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)
{
    resolve_all();
    ino_t ino = 0;
    /* RENAME_EXCHANGE keeps both inodes */
    int found = !(flags & RENAME_EXCHANGE) && replaced(olddirfd, oldpath, newdirfd, newpath, &ino);
    return after_removal(real_renameat2(olddirfd, oldpath, newdirfd, newpath, flags), found, ino);
}

static int after_mkdir(int dirfd, const char *pathname, int result)
{
    /* a new directory: nothing recorded under its inode number is its */
    ino_t ino = 0;
    if (result == 0 && victim(dirfd, pathname, &ino)) after_removal(0, 1, ino);
    return result;
}

int mkdir(const char *pathname, mode_t mode) { resolve_all(); return after_mkdir(AT_FDCWD, pathname, real_mkdir(pathname, mode)); }
int mkdirat(int dirfd, const char *pathname, mode_t mode) { resolve_all(); return after_mkdir(dirfd, pathname, real_mkdirat(dirfd, pathname, mode)); }
