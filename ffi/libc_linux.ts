/**
 * libc symbols used by Termada on Linux (glibc ≥ 2.34, where the pty functions live in
 * libc.so.6). Data only: each entry carries its C prototype. Blocking calls are
 * `nonblocking: true` so they run on Deno's blocking pool instead of the event loop; the only one
 * we ever leave pending is the poller's single `poll()` (see src/pty/poller.ts).
 */
export const LIBC_LINUX = {
  // int posix_openpt(int flags);
  posix_openpt: { parameters: ["i32"], result: "i32" },
  // int grantpt(int fd);
  grantpt: { parameters: ["i32"], result: "i32" },
  // int unlockpt(int fd);
  unlockpt: { parameters: ["i32"], result: "i32" },
  // int ptsname_r(int fd, char *buf, size_t buflen);
  ptsname_r: { parameters: ["i32", "buffer", "usize"], result: "i32" },
  // int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
  //                  const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);
  posix_spawnp: {
    parameters: ["buffer", "buffer", "buffer", "buffer", "buffer", "buffer"],
    result: "i32",
  },
  // int posix_spawnattr_init(posix_spawnattr_t *attr);
  posix_spawnattr_init: { parameters: ["buffer"], result: "i32" },
  // int posix_spawnattr_destroy(posix_spawnattr_t *attr);
  posix_spawnattr_destroy: { parameters: ["buffer"], result: "i32" },
  // int posix_spawnattr_setflags(posix_spawnattr_t *attr, short flags);
  posix_spawnattr_setflags: { parameters: ["buffer", "i16"], result: "i32" },
  // int posix_spawnattr_setsigmask(posix_spawnattr_t *attr, const sigset_t *mask);
  posix_spawnattr_setsigmask: { parameters: ["buffer", "buffer"], result: "i32" },
  // int posix_spawnattr_setsigdefault(posix_spawnattr_t *attr, const sigset_t *set);
  posix_spawnattr_setsigdefault: { parameters: ["buffer", "buffer"], result: "i32" },
  // int sigemptyset(sigset_t *set);
  sigemptyset: { parameters: ["buffer"], result: "i32" },
  // int sigfillset(sigset_t *set);
  sigfillset: { parameters: ["buffer"], result: "i32" },
  // int posix_spawn_file_actions_init(posix_spawn_file_actions_t *fa);
  posix_spawn_file_actions_init: { parameters: ["buffer"], result: "i32" },
  // int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t *fa);
  posix_spawn_file_actions_destroy: { parameters: ["buffer"], result: "i32" },
  // int posix_spawn_file_actions_addclose(posix_spawn_file_actions_t *fa, int fd);
  posix_spawn_file_actions_addclose: { parameters: ["buffer", "i32"], result: "i32" },
  // int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd,
  //                                      const char *path, int oflag, mode_t mode);
  posix_spawn_file_actions_addopen: {
    parameters: ["buffer", "i32", "buffer", "i32", "u32"],
    result: "i32",
  },
  // int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int newfd);
  posix_spawn_file_actions_adddup2: { parameters: ["buffer", "i32", "i32"], result: "i32" },
  // int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *fa, const char *path);
  posix_spawn_file_actions_addchdir_np: { parameters: ["buffer", "buffer"], result: "i32" },
  // int poll(struct pollfd *fds, nfds_t nfds, int timeout);  — the one pending blocking call
  poll: { parameters: ["buffer", "u64", "i32"], result: "i32", nonblocking: true },
  // ssize_t read(int fd, void *buf, size_t count);  (fds are O_NONBLOCK: never blocks)
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  // ssize_t write(int fd, const void *buf, size_t count);  (O_NONBLOCK master)
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  // int close(int fd);
  close: { parameters: ["i32"], result: "i32" },
  // int open(const char *path, int flags, mode_t mode);
  open: { parameters: ["buffer", "i32", "u32"], result: "i32" },
  // ssize_t readlink(const char *path, char *buf, size_t bufsiz);
  readlink: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  // int ioctl(int fd, unsigned long request, void *arg);
  ioctl: { parameters: ["i32", "u64", "buffer"], result: "i32" },
  // The same with an integer argument (requests that take a value, not a pointer).
  ioctl_value: { name: "ioctl", parameters: ["i32", "u64", "u64"], result: "i32" },
  // int dup2(int oldfd, int newfd);
  dup2: { parameters: ["i32", "i32"], result: "i32" },
  // int fcntl(int fd, int cmd, int arg);
  fcntl: { parameters: ["i32", "i32", "i32"], result: "i32" },
  // int pipe2(int pipefd[2], int flags);
  pipe2: { parameters: ["buffer", "i32"], result: "i32" },
  // pid_t tcgetpgrp(int fd);
  tcgetpgrp: { parameters: ["i32"], result: "i32" },
  // int tcgetattr(int fd, struct termios *t);
  tcgetattr: { parameters: ["i32", "buffer"], result: "i32" },
  // int kill(pid_t pid, int sig);
  kill: { parameters: ["i32", "i32"], result: "i32" },
  // pid_t waitpid(pid_t pid, int *status, int options);  (always with WNOHANG; the exec gate adds
  // __WALL for a process it traces)
  waitpid: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  // int pidfd_open(pid_t pid, unsigned int flags);
  pidfd_open: { parameters: ["i32", "u32"], result: "i32" },
  // DIR *opendir(const char *name);
  opendir: { parameters: ["buffer"], result: "pointer" },
  // struct dirent *readdir(DIR *dirp);
  readdir: { parameters: ["pointer"], result: "pointer" },
  // int closedir(DIR *dirp);
  closedir: { parameters: ["pointer"], result: "i32" },
  // int socket(int domain, int type, int protocol);
  socket: { parameters: ["i32", "i32", "i32"], result: "i32" },
  // int connect(int fd, const struct sockaddr *addr, socklen_t len);
  connect: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  // int shutdown(int fd, int how);
  shutdown: { parameters: ["i32", "i32"], result: "i32" },
  // int poll(struct pollfd *fds, nfds_t nfds, int timeout);  — blocking, ON the calling thread:
  // only for a process with nothing else to do (the stdio shim's relay loop).
  poll_here: { name: "poll", parameters: ["buffer", "u64", "i32"], result: "i32" },
  // int malloc_trim(size_t pad);  — glibc only (optional: absent on musl, the symbol is null).
  malloc_trim: { parameters: ["usize"], result: "i32", optional: true },
  // long syscall(long nr, ...);  — fixed six-argument form (integer arguments; pointers as
  // addresses from Deno.UnsafePointer.value). For calls glibc has no wrapper for: seccomp,
  // landlock_*, pidfd_getfd, kcmp.
  syscall6: {
    name: "syscall",
    parameters: ["i64", "i64", "i64", "i64", "i64", "i64", "i64"],
    result: "i64",
  },
  // int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5);
  prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
  // int execvpe(const char *file, char *const argv[], char *const envp[]);  (GNU; searches the
  // PATH of the caller's own environment — the launcher setenv()s the target's PATH first)
  execvpe: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  // int execve(const char *path, char *const argv[], char *const envp[]);
  execve: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  // ssize_t pread(int fd, void *buf, size_t count, off_t offset);
  pread: { parameters: ["i32", "buffer", "usize", "i64"], result: "isize" },
  // ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long liovcnt,
  //                          const struct iovec *remote, unsigned long riovcnt,
  //                          unsigned long flags);  (the exec gate reads a target's memory)
  process_vm_readv: {
    parameters: ["i32", "buffer", "u64", "buffer", "u64", "u64"],
    result: "isize",
  },
  // int socketpair(int domain, int type, int protocol, int sv[2]);
  socketpair: { parameters: ["i32", "i32", "i32", "buffer"], result: "i32" },
  // int getsockopt(int fd, int level, int name, void *val, socklen_t *len);
  getsockopt: { parameters: ["i32", "i32", "i32", "buffer", "buffer"], result: "i32" },
  // int fstat(int fd, struct stat *st);   (glibc ≥ 2.33 exports fstat/stat directly)
  fstat: { parameters: ["i32", "buffer"], result: "i32" },
  // int stat(const char *path, struct stat *st);
  stat: { parameters: ["buffer", "buffer"], result: "i32" },
  // int lstat(const char *path, struct stat *st);  (a symlink itself, not its target)
  lstat: { parameters: ["buffer", "buffer"], result: "i32" },
  // int setenv(const char *name, const char *value, int overwrite);
  setenv: { parameters: ["buffer", "buffer", "i32"], result: "i32" },
  // sighandler_t signal(int sig, sighandler_t handler);  (handler SIG_DFL = null)
  signal: { parameters: ["i32", "pointer"], result: "pointer" },
  // int sigprocmask(int how, const sigset_t *set, sigset_t *old);
  sigprocmask: { parameters: ["i32", "buffer", "buffer"], result: "i32" },
  // int usleep(useconds_t usec);  (the exec gate's short wait for an exec to finish)
  usleep: { parameters: ["u32"], result: "i32" },
  // int clearenv(void);
  clearenv: { parameters: [], result: "i32" },
  // void *memset(void *s, int c, size_t n);
  memset: { parameters: ["pointer", "i32", "usize"], result: "pointer" },
  // int unshare(int flags);
  unshare: { parameters: ["i32"], result: "i32" },
  // int mount(const char *src, const char *target, const char *fstype, unsigned long flags,
  //           const void *data);
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "buffer"], result: "i32" },
  // int mkdir(const char *path, mode_t mode);
  mkdir: { parameters: ["buffer", "u32"], result: "i32" },
  // uid_t geteuid(void);
  geteuid: { parameters: [], result: "u32" },
  // uid_t getuid(void);
  getuid: { parameters: [], result: "u32" },
  // gid_t getgid(void);
  getgid: { parameters: [], result: "u32" },
  // gid_t getegid(void);
  getegid: { parameters: [], result: "u32" },
  // int getresuid(uid_t *ruid, uid_t *euid, uid_t *suid);
  getresuid: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  // int getresgid(gid_t *rgid, gid_t *egid, gid_t *sgid);
  getresgid: { parameters: ["buffer", "buffer", "buffer"], result: "i32" },
  // int getgroups(int size, gid_t list[]);
  getgroups: { parameters: ["i32", "buffer"], result: "i32" },
  // int setgroups(size_t size, const gid_t *list);  — glibc applies it to every thread of the
  // process (its setxid broadcast); the raw syscall would change only the calling thread.
  setgroups: { parameters: ["usize", "buffer"], result: "i32" },
  // int setresgid(gid_t rgid, gid_t egid, gid_t sgid);  (all threads, as setgroups)
  setresgid: { parameters: ["u32", "u32", "u32"], result: "i32" },
  // int setresuid(uid_t ruid, uid_t euid, uid_t suid);  (all threads, as setgroups)
  setresuid: { parameters: ["u32", "u32", "u32"], result: "i32" },
  // int capset(cap_user_header_t hdr, const cap_user_data_t data);
  capset: { parameters: ["buffer", "buffer"], result: "i32" },
  // int fchown(int fd, uid_t owner, gid_t group);
  fchown: { parameters: ["i32", "u32", "u32"], result: "i32" },
  // int fchmod(int fd, mode_t mode);
  fchmod: { parameters: ["i32", "u32"], result: "i32" },
  // int isatty(int fd);
  isatty: { parameters: ["i32"], result: "i32" },
  // int chdir(const char *path);
  chdir: { parameters: ["buffer"], result: "i32" },
  // char *getcwd(char *buf, size_t size);
  getcwd: { parameters: ["buffer", "usize"], result: "pointer" },
  // pid_t getpid(void);
  getpid: { parameters: [], result: "i32" },
  // void _exit(int status);
  _exit: { parameters: ["i32"], result: "void" },
  // int *__errno_location(void);
  __errno_location: { parameters: [], result: "pointer" },
  // char *strerror(int errnum);
  strerror: { parameters: ["i32"], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

/** Constants for Linux x86_64 / aarch64 glibc (identical on both). */
export const LINUX = {
  O_RDONLY: 0,
  O_RDWR: 2,
  O_NOCTTY: 0o400,
  O_NONBLOCK: 0o4000,
  O_CLOEXEC: 0o2000000,
  F_GETFL: 3,
  F_SETFL: 4,
  POSIX_SPAWN_SETSIGDEF: 0x04,
  POSIX_SPAWN_SETSIGMASK: 0x08,
  POSIX_SPAWN_SETSID: 0x80,
  SIZEOF_SPAWNATTR: 336,
  SIZEOF_FILE_ACTIONS: 80,
  SIZEOF_SIGSET: 128,
  SIZEOF_TERMIOS: 60,
  TIOCSWINSZ: 0x5414,
  TIOCGWINSZ: 0x5413,
  /** Kernel termios (struct termios of the ioctl ABI, not glibc's): get and set as raw bytes. */
  TCGETS: 0x5401,
  TCSETS: 0x5402,
  /** Make this terminal the caller's controlling terminal / give up the controlling terminal. */
  TIOCSCTTY: 0x540e,
  TIOCNOTTY: 0x5422,
  F_DUPFD_CLOEXEC: 1030,
  POLLIN: 0x001,
  POLLOUT: 0x004,
  POLLERR: 0x008,
  POLLHUP: 0x010,
  POLLNVAL: 0x020,
  WNOHANG: 1,
  EINTR: 4,
  EIO: 5,
  ECHILD: 10,
  EAGAIN: 11,
  ESRCH: 3,
  EPIPE: 32,
  AF_UNIX: 1,
  SOCK_STREAM: 1,
  SOCK_CLOEXEC: 0o2000000,
  SHUT_WR: 1,
  /** struct sockaddr_un: sa_family_t (u16) + sun_path[108]. */
  SIZEOF_SOCKADDR_UN: 110,
  /** termios c_lflag bits and offset (struct termios: iflag, oflag, cflag, lflag: u32 each). */
  TERMIOS_LFLAG_OFFSET: 12,
  /** struct dirent (glibc, 64-bit): d_ino 8, d_off 8, d_reclen 2, d_type 1, then d_name. */
  DIRENT_NAME_OFFSET: 19,
  ICANON: 0o000002,
  ECHO: 0o000010,
  EACCES: 13,
  EPERM: 1,
  ENOENT: 2,
  EINVAL: 22,
  ENOSYS: 38,
  SIG_SETMASK: 2,
  SOL_SOCKET: 1,
  SO_PEERCRED: 17,
  CLONE_NEWNS: 0x00020000,
  MS_RDONLY: 1,
  MS_NOSUID: 2,
  MS_NODEV: 4,
  MS_NOEXEC: 8,
  MS_REMOUNT: 32,
  MS_BIND: 4096,
  MS_REC: 16384,
  MS_PRIVATE: 1 << 18,
  O_PATH: 0o10000000,
  O_DIRECTORY_X86: 0o200000,
  PR_SET_NO_NEW_PRIVS: 38,
  PR_GET_NO_NEW_PRIVS: 39,
  PR_SET_CHILD_SUBREAPER: 36,
  PR_SET_DUMPABLE: 4,
  PR_CAPBSET_DROP: 24,
  CAP_SYS_PTRACE: 19,
  PR_GET_CHILD_SUBREAPER: 37,
  PR_CAP_AMBIENT: 47,
  PR_CAP_AMBIENT_CLEAR_ALL: 4,
  /** _LINUX_CAPABILITY_VERSION_3: capset's header takes two 32-bit data words per set. */
  LINUX_CAPABILITY_VERSION_3: 0x20080522,
} as const;

/** Syscall numbers glibc has no wrapper for, by architecture. */
export const SYSCALLS = {
  x86_64: {
    execve: 59,
    execveat: 322,
    seccomp: 317,
    pidfd_getfd: 438,
    kcmp: 312,
    ptrace: 101,
    landlock_create_ruleset: 444,
    landlock_add_rule: 445,
    landlock_restrict_self: 446,
    /** AUDIT_ARCH_X86_64: what seccomp_data.arch holds for native calls. */
    auditArch: 0xc000003e,
  },
  aarch64: {
    execve: 221,
    execveat: 281,
    seccomp: 277,
    pidfd_getfd: 438,
    kcmp: 272,
    ptrace: 117,
    landlock_create_ruleset: 444,
    landlock_add_rule: 445,
    landlock_restrict_self: 446,
    auditArch: 0xc00000b7,
  },
} as const;

/** This machine's syscall table (x86_64 or aarch64; anything else has no kernel features). */
export function syscalls(): (typeof SYSCALLS)[keyof typeof SYSCALLS] | undefined {
  const arch = Deno.build.arch;
  return arch === "x86_64" || arch === "aarch64" ? SYSCALLS[arch] : undefined;
}

export const SIGNALS = {
  HUP: 1,
  INT: 2,
  QUIT: 3,
  KILL: 9,
  TERM: 15,
  CONT: 18,
  STOP: 19,
  TSTP: 20,
  WINCH: 28,
} as const;
