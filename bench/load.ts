// The load generator: N workers, each looping requests with Bun fetch over keep-alive (through the
// broker's CONNECT proxy, /proxy, or straight to the upstream), recording per-request latency with
// performance.now() plus errors and non-2xx answers. Certificates are always verified.

export interface Target {
  readonly url: string;
  readonly init: RequestInit & { proxy?: string; tls?: { ca: string }; keepalive?: boolean };
}

export interface LoadResult {
  readonly requests: number;
  readonly errors: number;
  readonly non2xx: number;
  readonly elapsedMs: number;
  /** per-request latencies in ms (completed requests only) */
  readonly latencies: Float64Array;
  readonly firstError?: string;
}

export async function runLoad(target: Target, opts: { requests: number; concurrency: number; expectBytes?: number }): Promise<LoadResult> {
  const lat = new Float64Array(opts.requests);
  let next = 0;
  let done = 0;
  let errors = 0;
  let non2xx = 0;
  let firstError: string | undefined;
  const worker = async () => {
    for (let i = next++; i < opts.requests; i = next++) {
      const t0 = performance.now();
      try {
        const res = await fetch(target.url, target.init);
        const body = await res.arrayBuffer();
        if (res.status < 200 || res.status > 299) {
          non2xx++;
          firstError ??= `HTTP ${res.status}: ${new TextDecoder().decode(body.slice(0, 200))}`;
        } else if (opts.expectBytes !== undefined && body.byteLength !== opts.expectBytes) {
          errors++;
          firstError ??= `body ${body.byteLength} bytes, expected ${opts.expectBytes}`;
        }
      } catch (err) {
        errors++;
        firstError ??= String(err);
      }
      lat[done++] = performance.now() - t0;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: opts.concurrency }, worker));
  return { requests: opts.requests, errors, non2xx, elapsedMs: performance.now() - t0, latencies: lat.slice(0, done), firstError };
}

export function percentile(sorted: Float64Array, p: number): number {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export interface Stats {
  readonly rps: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
}

export function statsOf(r: LoadResult): Stats {
  const s = r.latencies.slice().sort();
  return { rps: (r.requests * 1000) / r.elapsedMs, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99) };
}

export function median(xs: number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** A streamed body of `total` bytes that is generated chunk by chunk (never held whole). */
export function generatedBody(total: number, chunkBytes = 256 * 1024): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(chunkBytes).fill(0x7a);
  let sent = 0;
  return new ReadableStream({
    pull(ctrl) {
      if (sent >= total) return ctrl.close();
      const n = Math.min(chunkBytes, total - sent);
      ctrl.enqueue(n === chunkBytes ? chunk : chunk.subarray(0, n)); // constant bytes: aliasing is harmless
      sent += n;
    },
  });
}

/** Uploads `bytes` streamed; the upstream answers with the count it received. */
export async function upload(target: Target, bytes: number): Promise<{ ms: number; ok: boolean; error?: string }> {
  const t0 = performance.now();
  try {
    const res = await fetch(target.url, {
      ...target.init,
      method: "POST",
      body: generatedBody(bytes),
      headers: { "content-type": "application/octet-stream" },
    });
    const text = await res.text();
    const got = res.ok ? (JSON.parse(text) as { bytes: number }).bytes : -1;
    return { ms: performance.now() - t0, ok: got === bytes, error: got === bytes ? undefined : `HTTP ${res.status}, upstream counted ${got}` };
  } catch (err) {
    return { ms: performance.now() - t0, ok: false, error: String(err) };
  }
}

/** Downloads a streamed body, counting bytes as they arrive (never buffered). */
export async function download(target: Target, bytes: number): Promise<{ ms: number; ok: boolean; error?: string }> {
  const t0 = performance.now();
  try {
    const res = await fetch(target.url, target.init);
    let n = 0;
    for await (const c of res.body!) n += c.byteLength;
    const ok = res.ok && n === bytes;
    return { ms: performance.now() - t0, ok, error: ok ? undefined : `HTTP ${res.status}, ${n} bytes` };
  } catch (err) {
    return { ms: performance.now() - t0, ok: false, error: String(err) };
  }
}
