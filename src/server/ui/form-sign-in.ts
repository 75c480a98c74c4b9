// Signing a person in from an approval page's form: the new session goes only into the HttpOnly,
// SameSite=Strict cookie, and a failure comes back as the words the page shows (the same login throttle
// as the API: a 429 also says, in Retry-After, how long to wait).

import type { Context } from "hono";
import { BrokerError, RateLimited } from "../../errors.ts";
import type { Domain } from "../../identity/index.ts";
import { CredentialsInput, parseWith } from "../../contract/index.ts";
import { loginUser } from "../../identity/index.ts";
import { clientIp, sessionClientOf } from "../kit/index.ts";
import { setSessionCookie } from "./security.ts";

export interface SignInRefusal {
  readonly notice: string;
  readonly status: 403 | 429;
}

/** Undefined once signed in; otherwise what to tell the person. */
export async function signInFromForm(c: Context, d: Domain, form: Record<string, string>): Promise<SignInRefusal | undefined> {
  try {
    const creds = parseWith(CredentialsInput, { email: form.email, password: form.password });
    const { token } = await loginUser(d, creds, clientIp(c), sessionClientOf(c, "form"));
    setSessionCookie(c, d, token.reveal()); // reveal: only into the HttpOnly, SameSite=Strict session cookie
    return undefined;
  } catch (err) {
    if (!(err instanceof BrokerError)) throw err;
    if (err instanceof RateLimited) {
      c.header("retry-after", String(err.retryAfterSec));
      return { notice: `Too many failed sign-in attempts. Try again in ${err.retryAfterSec} second${err.retryAfterSec === 1 ? "" : "s"}.`, status: 429 };
    }
    return { notice: "Sign-in failed: invalid email or password.", status: 403 };
  }
}
