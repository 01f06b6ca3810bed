// Package sandbox is the executor of sandbox tools (DESIGN §7): a program
// started from an argv template, never through a shell, inside namespaces,
// Landlock, seccomp and rlimits applied by a re-exec helper of the worker
// binary. What the host lacks is reported, never silently dropped.
//
// # Argv templates
//
// A tool's SandboxConfig.argv is a list of elements. argv[0] is the
// program: an absolute path (there is no PATH look-up) without
// placeholders. A placeholder {name} (letters, digits, _ and -, not
// starting with a digit or -) is replaced by the argument of that name;
// "{{" and "}}" are literal braces. An element may be exactly one
// placeholder ("{path}") or embed placeholders in text ("--file={path}");
// either way the substituted element stays exactly one argv element,
// whatever the value holds (spaces, quotes, newlines, "$(...)", globs):
// nothing is ever interpreted, because no shell is involved and elements
// are never split or joined.
//
// Values: strings as they are; integers in plain decimal of any size;
// other numbers in the shortest plain decimal that round-trips through
// float64 (1e3 → 1000, 2.5E-3 → 0.0025, never an exponent); booleans as
// true/false. Objects and arrays are refused (VALIDATION naming the
// field), as are NUL bytes (no argv element can hold one). A missing or
// null argument drops its whole element, whether the element is the bare
// placeholder or embeds it ("--file={path}" disappears without path), so
// optional flags are written embedded.
//
// Option injection: a value that begins an element (a bare placeholder,
// or one at the start of an element) and starts with "-" is refused with
// a VALIDATION error naming the field, unless the argument is listed in
// option_args. A value embedded after literal text ("--file=-x") cannot
// become an option and is allowed. Negative numbers are therefore refused
// too unless listed. Templates should still put "--" before operands, and
// CheckSpec enforces it (below).
//
// stdin_arg writes that argument to the process's standard input:
// strings as they are, numbers and booleans as above, and — unlike argv —
// objects and arrays as their compact JSON text. Without stdin_arg, stdin
// is /dev/null.
//
// # CheckSpec
//
// CheckSpec validates a spec at start-up: the program path, placeholder
// syntax, that placeholders, stdin_arg and option_args name properties of
// the input schema, environment names, limits, paths and exit codes. Its
// "--" rule: an element that is a bare placeholder (an operand) must come
// after a literal "--" element, or directly after a literal option element
// whose value it is ("-o {out}"); and such an option value must be a
// required argument, since dropping a missing one would leave the option
// dangling and swallow the next element. Programs that do not understand
// "--" take their operands embedded or as required option values.
//
// # The helper
//
// Execute starts /proc/self/exe (the worker binary itself; the path needs
// no directory permissions) with argv[0] "toolwire-sandbox-helper", an
// environment of only TOOLWIRE_SANDBOX_HELPER=1, and two inherited pipes:
// fd 3 carries one JSON document (argv, environment, paths, limits, which
// mechanisms to apply), fd 4 (close-on-exec) carries back a set-up error,
// so EOF on it means the target was exec'd. Binaries call
//
//	if sandbox.IsHelper() {
//		sandbox.RunHelper()
//	}
//
// first thing in main; cmd/worker, cmd/dispatcher and toolworker.Main do.
//
// The helper is cloned into new user, pid, mount, ipc and uts namespaces,
// plus a network namespace unless the tool has network on. Its uid and
// gid inside are 65534, mapped to Config.UID/GID (default 65534, nobody)
// on the host when the worker is root, or to the worker's own ids when it
// is not (an unprivileged process can map only itself; reported as the
// "setuid" gap). A root worker's supplementary groups are dropped
// (setgroups is allowed only for that); an unprivileged worker's cannot
// be. The helper holds CAP_SYS_ADMIN and CAP_SETPCAP in its own user
// namespace only (ambient), to:
//
//  1. make every mount private, set the host name to "sandbox";
//  2. mount a fresh /proc, which shows only the sandbox's processes (the
//     worker's /proc/<pid>/environ is not there to read);
//  3. mount a tmpfs of Config.TmpBytes on /tmp, the working directory and
//     HOME and TMPDIR: fresh per call, gone with the namespace, and full
//     at its size. Spec paths under /tmp, which it would hide, are opened
//     first and bound back at the same place (read-only ones read-only).
//     With network off, an empty read-only tmpfs also hides /run, where
//     daemons keep their UNIX sockets (unless a listed path is under it);
//  4. drop every capability (bounding, ambient, inheritable, permitted,
//     effective) and set no_new_privs;
//  5. apply Landlock (best effort up to the kernel's ABI): read and
//     execute on a system list (/usr, /bin, /sbin, /lib*, the dynamic
//     loader's configuration, /etc/passwd, /etc/group, /etc/nsswitch.conf,
//     /etc/localtime, /dev/urandom; with network on also resolv.conf,
//     hosts and CA certificates), /proc, Config.ReadOnlyPaths and the
//     spec's read_only_paths; read and write on /tmp, /dev/null, /dev/zero,
//     /dev/full and the spec's writable_paths; nothing else, not even
//     listing "/". With network off, TCP bind and connect are also denied
//     (ABI 4); with network on, TCP bind is denied and connect allowed only
//     to Config.EgressPorts and 53 (see "Tools with network access"
//     below). A second layer scopes signals and abstract UNIX sockets to
//     the sandbox (ABI 6);
//  6. load seccomp filters: EPERM for kernel and namespace administration
//     (mount, setns, unshare, clone with CLONE_NEWUSER, pivot_root, ...),
//     ptrace and process_vm_*, keyrings, bpf, perf, userfaultfd, io_uring
//     (which would bypass the filter), modules, kexec, reboot, clock
//     setting, personality; ENOSYS for clone3 (its flags are out of the
//     filter's reach; libc falls back to clone); with network off, socket()
//     of any family but AF_UNIX. A second filter kills system calls of any
//     other architecture (i386 through int 0x80 on amd64). With network on,
//     a third filter is the egress guard's (below), installed last;
//  7. set the rlimits and exec the target with execve, from the same
//     thread (capabilities, no_new_privs and seccomp are per thread), with
//     nothing allocated between the rlimits and the exec. The target is
//     pid 1 of its namespace.
//
// # The helper pool
//
// Starting a helper is most of a sandboxed call's cost (see Cost below),
// and none of it depends on the call until the helper reads its
// document. So the executor keeps up to Config.HelperPool helpers
// (default 4, at most 64; -1 turns the pool off) started ahead: each
// is started as above, with argv[1] "parked", cloned into its user,
// pid, mount, ipc, uts and network namespaces with the uid and gid maps,
// through the Go runtime's start and the package initialisation that
// precedes the helper's (see Cost); it then writes a ready byte on fd 4 and blocks reading
// fd 3. Everything that depends on the call — the mounts (the private
// root, the host name, /proc, the tmpfs with the spec's paths bound back,
// /run), dropping capabilities, Landlock, seccomp, the rlimits, stdin —
// happens after it has read the call's document, in the same order and
// by the same code as in a helper started for the call. Isolation is
// therefore unchanged: a call's namespaces have never held another call,
// and its mounts, rules, filters and limits are its own
// (TestHelperPoolRunsEachHelperOnce: each call is pid 1 of its pid
// namespace, has a fresh /tmp for working directory, the rlimits of its
// own spec and its own stdin). A parked helper has no capability outside
// its namespaces and runs no code of a tool. Its mount namespace is a
// copy of the worker's taken when it started, which follows the host's
// later mounts where those are shared (systemd's default) until the
// helper makes its mounts private, after it took its call.
//
// Only tools without network access use the pool: a network tool's
// helper is cloned without a network namespace and gets the egress
// guard's socket per call, so it is started for its call as before, as
// is every helper without user namespaces (the weaker path below).
//
// Each helper runs one call at most. A call takes the oldest parked
// helper out of the pool under a lock; the helper reports a second byte
// on fd 4 once it has read the document, then execs the target (which
// becomes pid 1 of its pid namespace, and the namespace ends with it) or
// fails and exits. It is never parked again. A helper parks only after
// its ready byte (within 30 s, else it is killed); it is handed a call
// only while it has not exited (its waiter has not reaped it, and
// waitid(2) with WNOWAIT sees no zombie); one that dies parked is dropped
// and replaced. A helper killed while being handed a call ends without
// the second byte: the call then starts a fresh helper, as without a pool,
// and logs a warning (TestHelperPoolReplacesAHelperLostInHandOver kills
// the helper a call has taken before the call is sent to it;
// TestHelperPoolDiscardsDeadHelpers). When the pool is empty a call
// starts its own helper at once; it never waits for the pool.
//
// The pool is filled by one goroutine of the executor, started by the
// first call that can use it (an executor that never runs such a tool
// parks nothing) and woken by every take and discard: it starts the
// missing helpers one at a time, the next once the previous has parked
// or its start has failed and backed off, so that parked and starting
// helpers together never exceed HelperPool and a refill never has more
// than one fork (a full fork of the worker binary: the new user
// namespace rules out vfork) and Go runtime start in flight. A burst of
// them at once held both Ps of a 2-core machine long enough to starve
// the worker's own goroutines (an egress supervisor missed 20 signals
// in a row under test); a start is about 10 ms, so the pool still fills
// in well under a second. A failed start keeps its place for a
// back-off (a second, doubling up to a minute while starts fail).
// Close stops it and kills the parked helpers with the running ones,
// waiting until all are reaped (TestHelperPoolCloseLeavesNoProcess;
// TestNoOrphans closes its executor with the pool full after 1,000 calls
// and then finds no child process of its own at all).
// Like a helper started for a call, a pooled one is forked on a thread
// locked until it is reaped (its owner goroutine's), so the
// parent-death signal holds: besides the running sandboxes, the pool
// holds at most HelperPool processes, locked OS threads and owner
// goroutines, and five pipes each. A parked helper of the worker binary
// measured (toolwire-bench, 2026-11-30) 40–49 MiB resident, nearly all of
// it the binary's pages, which the worker and every helper share: its
// proportional share was 10–13 MiB and its private memory 2.4–2.7 MiB
// (58–70, 11–16 and 3–7 MiB before the helper had a package of its own).
// A parked helper also wakes once a second for as long as it is parked:
// nats-server's server/pse, initialised before package helper (see
// Cost), reads /proc/<pid>/stat in its init and re-arms a one-second
// time.AfterFunc, so each parked helper keeps a Go timer (and during
// set-up a second thread) alive — up to 64 wake-ups a second at the
// largest pool. It has no isolation impact: the helper's set-up runs on
// its locked thread, and execve ends every other thread before the tool
// runs.
//
// # Tools with network access
//
// A spec with network: true gets no network namespace: the sandbox has no
// way to give a namespace of its own egress without a user-mode network
// stack or changes to the host's routing, so such a tool shares the
// worker's network namespace, and with it the worker's loopback — its
// NATS connection's server, the dispatcher's API when it runs on the same
// host, any other local service — and whatever the host reaches: private
// networks and the cloud metadata address 169.254.169.254. That is an
// operator's decision, not a tool author's: a worker refuses to start
// with such a tool (Executor.CheckSpec) and the executor refuses its
// calls (PERMANENT) unless Config.HostNetwork is set. Two guards then
// keep the tool to the internet.
//
// The egress guard checks the destination of every connection and
// datagram by address, with the HTTP executor's rule (package egress):
// loopback, private, link-local, unique-local, shared, multicast,
// documentation and the other special ranges are refused unless listed in
// Config.EgressAllowNetworks, cloud metadata addresses unless listed as
// the single address, and ports other than Config.EgressPorts (default
// 443 and 80), for TCP and UDP alike. One exception keeps name resolution
// working: the nameservers of Config.ResolvConf (/etc/resolv.conf, read
// at each call) may be reached on port 53, UDP and TCP, wherever they are
// — 127.0.0.53 of systemd-resolved included — and on no other port.
//
// The mechanism is seccomp user notification. The helper installs a last
// filter on the thread that execs the target: connect(2) and sendto(2)
// with a destination address of 16 bytes or more, and every sendmsg(2)
// and sendmmsg(2), stop in the kernel and notify a listener; the helper
// sends the listener to the worker over a UNIX socket (fd 5), from
// another thread, since sendmsg is filtered on its own, and closes every
// copy before the exec. (An address shorter than 16 bytes names no IP
// destination, IPv4 refusing one and IPv6 wanting 24, and its length is
// a register the tool cannot change after the filter read it: such calls
// — netlink's sendto among them — and sendto without an address run
// unnotified.)
//
// A supervisor goroutine of the worker receives each notification and
// handles it on a goroutine of its own (a blocking socket blocks connect;
// at most 64 at a time per call, more are answered EAGAIN). Once the
// worker has received a notification, the tool's thread waits for the
// answer killably (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, Linux 5.19):
// a signal it handles is taken after the call, never restarting a call
// the worker is making. The supervisor never lets the kernel run the
// call, which would read the tool's memory again after the check: it
// copies the call out of the process's memory with
// process_vm_readv(2) — the sockaddr, and for the send calls the
// payload (64 KiB per message at most: a stream socket's send is cut
// short to it, a datagram's larger is EMSGSIZE; eight messages of a
// sendmmsg at most, which then reports fewer sent, as it may) —,
// duplicates the tool's socket with pidfd_getfd(2) (the calling thread's
// descriptor table with PIDFD_THREAD of Linux 6.9, its process's before),
// checks that the notification still waits (SECCOMP_IOCTL_NOTIF_ID_VALID,
// with the number older kernels know as a fallback; so the memory and the
// descriptor were the caller's), judges every destination of the copy,
// and makes the call itself on the duplicate with the copy, answering
// with its result (0, a byte or message count, or the kernel's errno
// such as EINPROGRESS, ECONNREFUSED or EPIPE; a sendmmsg's msg_len fields
// are written back) or EACCES. A sendmmsg is made as the kernel makes it:
// message by message, stopping after an error, after a message sent
// short or cut to 64 KiB (a stream's next messages must not follow a
// hole), and before a message refused or a datagram too big, whose
// predecessors are sent and counted; an error only when the first
// message fails; and messages sent are counted even when their msg_len
// cannot be written back (the kernel would say EFAULT, and the tool send
// them again). A second thread rewriting the address after the check
// therefore changes nothing, and neither does one swapping the
// descriptor for another socket. Addresses are read as the kernel reads
// them: AF_INET and AF_INET6 (IPv4-mapped addresses as IPv4), AF_UNSPEC
// as a disconnect for connect but as AF_INET for a datagram (IPv4 UDP
// reads it so); other families name no IP destination and the IP socket
// refuses them. Only IPv4 and IPv6 sockets are served: the worker cannot
// act for the tool on a UNIX socket (the path would be resolved in the
// worker's mount namespace with its permissions, and the peer would see
// the worker's credentials) nor on a netlink one, so a network tool's
// connect and sendto to a UNIX address of 16 bytes or more (a path of 13
// characters or more) and its sendmsg and sendmmsg on UNIX and netlink
// sockets fail with EACCES. Control messages (msg_control) are refused
// with EACCES too; MSG_ZEROCOPY is dropped and MSG_NOSIGNAL added (the
// tool gets EPIPE without SIGPIPE). The same filter confines socket(2) to
// AF_UNIX, AF_NETLINK, and AF_INET and AF_INET6 of type SOCK_STREAM or
// SOCK_DGRAM with protocol 0, TCP, UDP, ICMP or ICMPv6 (no raw sockets;
// no SCTP, whose connectx takes addresses in a socket option the filter
// cannot see), refuses x32 system call numbers, and fails with EPERM the
// socket options that would send a checked call's packets to another
// address — IP_OPTIONS (loose and strict source routing make the kernel
// send to the first hop), IPV6_RTHDR (a routing header, which needs no
// CAP_NET_RAW), IPV6_2292RTHDR and IPV6_2292PKTOPTIONS; the worker's
// duplicate shares the socket's options — and io_uring (io_uring_setup,
// io_uring_enter, io_uring_register), whose operations connect and send
// without these system calls; the first filter refuses io_uring too, but
// the guard does not depend on it. The same per packet, as control
// messages, is refused with the rest of msg_control. Refusals are logged
// at WARN (ten per call at most). Every notification is answered: with
// the kernel's errno of the call the worker made, EFAULT when the tool's
// memory cannot be read, EAGAIN while the supervisor stops or beyond 64
// pending, and EACCES for a refusal or a failure of the worker's own
// (pidfd_getfd, a socket it cannot serve). The supervisor stops when the
// process is gone, first shutting down the duplicates of calls still in
// progress; a task still filtered after that fails its calls with
// ENOSYS, so the guard fails closed.
//
// What it cannot see:
//
//   - What reaches the allowed destinations: a resolver on port 53 takes
//     any query, so data can leave through DNS, and DNS answers are not
//     checked themselves — a name that resolves to a refused address is
//     refused only at connect.
//   - Before Linux 5.19 (no SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV), a
//     call interrupted by a signal while the worker makes it may still
//     take effect (the connection is made, the datagram or bytes sent)
//     though the tool sees it fail or restarts it, so a send may happen
//     twice. On any kernel a thread killed meanwhile leaves its call
//     made, and a blocking connect the tool gave up on holds one of the
//     64 places until it completes or times out.
//   - A UNIX socket to a local daemon that connects on the tool's behalf
//     is Landlock's and the file permissions' matter (the "landlock-unix"
//     gap) for addresses the filter lets through; bpf, ptrace and
//     process_vm_writev are the first filter's.
//
// Landlock (ABI 4) denies TCP bind, and TCP connect of the tool's own
// to ports other than EgressPorts and 53 (the connections the worker
// makes for it are held to the guard's ports).
//
// Every response of such a tool carries "host-network" in
// meta.isolation_gaps; "landlock-net" as well where the kernel's Landlock
// cannot limit ports; and "egress-guard" where the probe found that the
// guard does not work (seccomp user notification before Linux 5.0,
// pidfd_getfd before 5.6, seccomp unavailable to the helper, or the
// worker not allowed to read the sandbox's memory or take its descriptors,
// as under Yama's ptrace_scope 3). Without the egress guard a network
// tool reaches every address on the egress ports, and so the worker
// refuses such tools (CheckSpec, and PERMANENT at call time) unless
// Config.UnguardedEgress accepts it.
//
// # Probing and gaps
//
// New starts one helper in probe mode: it tries every step and reports
// which work. If namespaces cannot be created at all (a container without
// user namespaces), it probes again without them, and the executor then
// runs tools directly as Config.UID (when root) in an on-disk working
// directory under Config.WorkDir (removed after the call; file size
// bounded by RLIMIT_FSIZE), still with Landlock, seccomp and rlimits.
// The probe also tries the egress guard end to end: its helper hands the
// listener to the worker's supervisor, as a call does, and connects an
// IPv4 socket to AF_UNSPEC, which the supervisor copies with
// process_vm_readv, duplicates with pidfd_getfd, checks with ID_VALID,
// makes and answers; any failure is the per-tool "egress-guard" gap
// above. IsolationGaps names what is missing: "userns" (and with it pid, net,
// mount, ipc, uts), "proc", "tmpfs", "landlock", "landlock-scope",
// "landlock-unix" (Landlock before ABI 9 does not stop connect(2) to
// pathname UNIX sockets: one outside the hidden /run and /tmp stays
// reachable when its file permissions allow), "seccomp", "setuid", and
// always "cgroup". A step that the probe found
// working and that then fails is an error of the call, never a silent
// downgrade. Config.Require names mechanisms without which New fails
// ("all" for every one but cgroup); by default the executor runs with what the host
// has and says so through IsolationGaps, which the worker logs and puts
// in every response's meta.
//
// Cgroups are not used: hosts differ (v1 here, v2 in production), a
// worker in a container rarely may create cgroups, and a cgroup that
// outlives a crashed worker is a leak. Instead memory is RLIMIT_DATA per
// process (private writable memory; RLIMIT_AS would stop Go programs from
// starting below about 900 MiB), processes are RLIMIT_NPROC (counted per
// sandbox, since each has its own user namespace; threads count), CPU is
// RLIMIT_CPU per process, and the namespace bounds the rest. A tree of
// processes may therefore use up to processes × memory. Without user
// namespaces RLIMIT_NPROC counts every process of the sandbox's uid on the
// host, so concurrent calls share it.
//
// # Limits and outcomes
//
// Limits come from the spec's SandboxLimits, each zero field from Config.
// Wall time: the executor kills the sandbox and answers TIMEOUT ("wall
// time limit of ... exceeded"). CPU: the kernel kills at the limit and the
// answer is PERMANENT ("cpu limit of Ns exceeded"). Memory: allocations
// fail and the program exits or crashes; the message adds "memory limit
// ... probably reached" when its peak resident size came within half of
// the limit (the kernel sends no signal, so this is inferred). Processes,
// open files and file size: the system calls fail (EAGAIN, EMFILE, EFBIG
// or ENOSPC) and the program reports it. Output: stdout and stderr
// together are capped at output_bytes; a process writing more is stopped
// at once, and its stdout up to the cap is returned as a success with a
// "[output truncated ...]" marker (with json_output, PERMANENT, since
// half a JSON document is none). The worker moves large outputs to the
// blob store, so this cap only bounds memory and time.
//
// Exit code 0: stdout as one text block (invalid UTF-8 replaced by
// U+FFFD, since protobuf strings must be UTF-8), or with json_output the
// structured output and the same compact JSON as text. With intents_field
// the stdout object's field of that name, an array of {"type", "payload"},
// becomes the result's intents with ids "i1", "i2", ... in order, and is
// removed from the structured output. A non-zero exit code is the type
// exit_codes maps it to, otherwise PERMANENT, with the tail of stderr (or
// of stdout when stderr is empty) in the message. A process killed by a
// signal other than a limit's is INTERNAL ("process crashed: killed by
// SIGSEGV"). A sandbox that could not be set up (say, the program does
// not exist or is not readable) is INTERNAL with no side effects.
//
// Cancellation: when ctx ends, the sandbox's init is killed, which kills
// every process in its pid namespace; Execute waits (at most
// Config.KillWait) until all are gone and returns an error wrapping
// ctx.Err(), which tool.AsError maps to TIMEOUT or CANCELLED. The helper
// also carries a parent-death signal, so a crashed worker leaves nothing
// running. Linux sends that signal when the thread that forked the helper
// ends, not the process (go.dev/issue/27505), and the Go runtime ends a
// thread whenever a goroutine ends while locked to it (a Go tool of the
// same worker may): so each helper is forked on a thread locked to the
// goroutine that waits for it (the call's, or for a pooled helper its
// owner's), until the helper is gone. That is one parked OS thread per
// running sandbox, bounded by the worker pool's concurrency, plus one per
// pooled helper (TestThreadExitsDoNotKillSandboxes). Without a pid namespace (the weaker path) the process group is
// killed instead, which a tool that starts a new session escapes.
//
// The environment of the target is built, never inherited: the spec's
// env, then the variables env_allow names that the worker has, then PATH
// (Config.Path), HOME and TMPDIR (the working directory) unless set.
//
// # Cost
//
// A sandboxed /bin/true costs about 8 ms on the development VM against
// 0.7 ms for a bare os/exec (BenchmarkSpawnTrue, BenchmarkBareExecTrue).
// Measured phase by phase (the package's test binary, one call at a
// time, p50 of 100 on a loaded 2-core machine, 2026-11-30): 3.7 ms from
// fork to exec of the helper (cloning the namespaces), 7.2 ms from there
// to the helper's first line (the Go runtime and every package's
// initialisation), 0.2 ms to read the document, 0.2 ms of mounts, 1.5 ms
// of Landlock, 0.4 ms of seccomp, and 2.6 ms from the target's exec to
// its reaping (namespace teardown included): 17 ms in all, of which the
// helper pool takes the first 11 ms off the call's path.
//
// The helper's code is in package helper, which imports only the
// standard library, x/sys, Landlock and go-seccomp-bpf, and whose init
// runs the helper. Go (1.21 on) initialises, again and again, the first
// package in import-path order whose imports are all initialised, so
// the helper's init does not run as soon as its imports are: in the
// worker, dispatcher and toolwire-bench binaries some 196–198 package
// initialisers still precede it (0.8 MB allocated, against 314 and
// 4.4 MB when the helper was in package sandbox), among them about 100
// small generated protobuf descriptor inits (descriptorpb, protodesc,
// the well-known types, genproto's googleapis, the OTLP and S2A protos,
// Prometheus' client_model), nats-server's pse and nats-io/nuid. What
// it now runs before is the JSON Schema library, which compiles its
// metaschemas (half of the old start-up), and envoy's go-control-plane
// (xDS) protobuf registries (measured with GODEBUG=inittrace=1, each
// binary started as a helper). A helper start of toolwire-bench, to its
// first line, went from about 34 to 10 ms of CPU on the loaded machine.
// An import added to package helper moves its init later again: keep it
// small.
package sandbox
