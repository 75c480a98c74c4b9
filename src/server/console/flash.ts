// Flash messages carried across a post-redirect-get: a short-lived HttpOnly cookie holding the
// kind and text, signed with a key held in memory so another origin's cookie cannot put words in
// the console's mouth. Read once and cleared. The text is rendered escaped, never as markup.

import { createHmac, timingSafeEqual } from "node:crypto";
import type { Context } from "hono";
import type { Domain } from "../../identity/index.ts";
import { randomBytes } from "../../crypto/index.ts";
import { clearPageCookie, readPageCookie, setPageCookie } from "../ui/index.ts";

export type FlashKind = "success" | "error" | "info";

export interface Flash {
  readonly kind: FlashKind;
  readonly text: string;
}

const MAX_TEXT = 400;
const FLASH_MAX_AGE_SEC = 60;
const KINDS: readonly FlashKind[] = ["success", "error", "info"];

export interface FlashSigner {
  write(c: Context, flash: Flash): void;
  /** The pending flash, if any, cleared from the browser as it is read. */
  take(c: Context): Flash | undefined;
}

/** `key` defaults to 32 random bytes: a restart (or another instance) drops pending flashes, nothing worse. */
export function createFlashSigner(d: Domain, key: Uint8Array = randomBytes(32)): FlashSigner {
  const sign = (payload: string) => createHmac("sha256", key).update(payload).digest("base64url");
  return {
    write(c, flash) {
      const payload = Buffer.from(JSON.stringify({ k: flash.kind, t: flash.text.slice(0, MAX_TEXT) })).toString("base64url");
      setPageCookie(c, d, "flash", `${payload}.${sign(payload)}`, FLASH_MAX_AGE_SEC);
    },
    take(c) {
      const raw = readPageCookie(c, d, "flash");
      if (raw === undefined) return undefined;
      clearPageCookie(c, d, "flash");
      const [payload = "", mac = ""] = raw.split(".");
      const want = sign(payload);
      if (mac.length !== want.length || !timingSafeEqual(Buffer.from(mac), Buffer.from(want))) return undefined;
      try {
        const { k, t } = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { k?: unknown; t?: unknown };
        if (!KINDS.includes(k as FlashKind) || typeof t !== "string") return undefined;
        return { kind: k as FlashKind, text: t.slice(0, MAX_TEXT) };
      } catch {
        return undefined;
      }
    },
  };
}
