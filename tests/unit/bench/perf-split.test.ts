// bench/perf-split.ts reads perf's own report text: lines as `perf report --stdio` prints them on this kernel,
// for the broker (BoringSSL inside the binary, __x64_sys_* entries) and for Squid (OpenSSL shared, ksys_* entries).

import { expect, test } from "bun:test";
import { placeOf, splitOf } from "../../../bench/perf-split.ts";

const BROKER_PLACES = `# Samples: 12K of event 'cpu-clock:ppp'
#
# Overhead  Shared Object
# ........  .................
#
    52.15%  broker
    27.04%  [kernel.kallsyms]
    17.92%  [JIT] tid 9740
     2.11%  libc.so.6
     0.79%  [vdso]
`;

const BROKER_CALLS = `#
    24.24%     0.50%  [k] do_syscall_64
    15.70%     0.02%  [k] __x64_sys_sendto
    15.69%     0.06%  [k] __sys_sendto
     1.50%     0.03%  [k] __sys_recvfrom
     1.50%     0.00%  [k] __x64_sys_recvfrom
     1.48%     0.00%  [k] ksys_write
     9.72%     9.72%  [k] _raw_spin_unlock_irqrestore
`;

const SQUID_PLACES = `    45.10%  squid
    31.00%  [kernel.kallsyms]
    14.00%  libc.so.6
     5.00%  libcrypto.so.3
     3.00%  libssl.so.3
     1.90%  libstdc++.so.6.0.30
`;

const SQUID_CALLS = `    28.68%     1.15%  [k] do_syscall_64
    16.64%     0.00%  [k] ksys_write
    16.33%     0.23%  [k] vfs_write
     6.10%     0.00%  [k] ksys_read
     5.14%     0.08%  [.] epoll_ctl
`;

test("each shared object lands in its place, shares of one place summed", () => {
  const broker = splitOf(BROKER_PLACES, BROKER_CALLS);
  expect(Object.fromEntries(broker.places)).toEqual({
    "program's own code": 52.15,
    kernel: 27.04,
    "JIT-compiled JavaScript": 17.92,
    libc: 2.11,
    "other libraries": 0.79,
  });
  const squid = splitOf(SQUID_PLACES, SQUID_CALLS);
  expect(squid.places.get("TLS library (OpenSSL)")).toBeCloseTo(8, 5);
  expect(squid.places.get("program's own code")).toBe(45.1);
  expect(squid.places.get("other libraries")).toBe(1.9);
});

test("a system call is named by its largest entry symbol; do_syscall_64 is their sum; user-space lines are not calls", () => {
  const broker = splitOf(BROKER_PLACES, BROKER_CALLS);
  expect(Object.fromEntries(broker.syscalls)).toEqual({ "all system calls": 24.24, sendto: 15.7, recvfrom: 1.5, write: 1.48 });
  const squid = splitOf(SQUID_PLACES, SQUID_CALLS);
  expect(Object.fromEntries(squid.syscalls)).toEqual({ "all system calls": 28.68, write: 16.64, read: 6.1 });
});

test("names that only look alike stay apart", () => {
  expect(placeOf("libcrypt.so.1")).toBe("other libraries");
  expect(placeOf("libc++.so.1")).toBe("other libraries");
  expect(placeOf("broker-old")).toBe("other libraries");
  expect(placeOf("ld-linux-x86-64.so.2")).toBe("libc");
});
