// Reads `perf report --stdio` text into where a process's samples ran (bench/where-time-goes.ts): the
// kernel, the program's own code, JIT-compiled JavaScript, the TLS libraries, libc; and, within the
// kernel, each system call with everything it runs on the caller's behalf.

export interface Split {
  /** Percent of the process's samples per place (kernel, program, JIT, TLS library, libc, other). */
  readonly places: Map<string, number>;
  /** Percent of samples under each system call (with what the kernel does on its behalf); "all system calls" for their sum. */
  readonly syscalls: Map<string, number>;
}

/** `perf report` arguments for the places (one line per shared object). */
export const PLACES_REPORT = ["--no-children", "--sort", "dso"];
/** `perf report` arguments for the system calls (kernel symbols with their children's samples). */
export const SYSCALLS_REPORT = ["--children", "--sort", "sym", "--dsos", "[kernel.kallsyms]"];

export function placeOf(dso: string): string {
  if (dso === "[kernel.kallsyms]") return "kernel";
  if (dso.startsWith("[JIT]")) return "JIT-compiled JavaScript";
  if (/^lib(ssl|crypto)\b/.test(dso)) return "TLS library (OpenSSL)";
  if (/^libc[.-]|^ld-linux/.test(dso)) return "libc";
  if (/^(broker|bun|bun\.exe|squid)$/.test(dso)) return "program's own code";
  return "other libraries";
}

/** `places`: the PLACES_REPORT text; `syscalls`: the SYSCALLS_REPORT text. */
export function splitOf(places: string, syscalls: string): Split {
  const byPlace = new Map<string, number>();
  for (const m of places.matchAll(/^\s+([\d.]+)%\s+(\S.*?)\s*$/gm)) {
    const place = placeOf(m[2]!);
    byPlace.set(place, (byPlace.get(place) ?? 0) + Number(m[1]));
  }
  const byCall = new Map<string, number>();
  // A call's entry symbol differs by call and kernel (__x64_sys_sendto here, ksys_write there, its wrappers
  // around both): the largest share among them is the call's.
  for (const m of syscalls.matchAll(/^\s+([\d.]+)%\s+[\d.]+%\s+\[k\] (?:__x64_sys_|__do_sys_|__sys_|ksys_|do_syscall_)(\w+)\s*$/gm)) {
    const name = m[2] === "64" ? "all system calls" : m[2]!;
    byCall.set(name, Math.max(byCall.get(name) ?? 0, Number(m[1])));
  }
  return { places: byPlace, syscalls: byCall };
}
