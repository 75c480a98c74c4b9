/** @jsxImportSource hono/jsx */
// Signing in, registering and signing out in the browser, through the API's own domain calls
// (loginUser with the login throttle, registerUser with the first-user and allowed-domain rules,
// logout; the form read by the API's CredentialsInput), plus "Sign in with <provider>" when one is configured. A failed attempt re-renders the
// form with the email kept; the password never is.

import { Hono } from "hono";
import type { Child } from "hono/jsx";
import { BrokerError, RateLimited } from "../../errors.ts";
import { CredentialsInput, parseWith } from "../../contract/index.ts";
import { loginUser, logout, registerUser } from "../../identity/index.ts";
import { authTier, clientIp, sessionClientOf } from "../kit/index.ts";
import { clearPageCookie, setSessionCookie } from "../ui/index.ts";
import { Button, FormField, PostForm } from "../ui/index.ts";
import { describeError, formOf, plural, redirectWithFlash, renderPage, type ConsoleContext, type ConsoleEnv } from "./context.tsx";
import { ProviderSignIn } from "../ui/index.ts";

export type SignInMode = "sign-in" | "first-user";

export interface SignInState {
  readonly email?: string;
  readonly error?: string;
  /** Which form the error belongs to. */
  readonly form?: "sign-in" | "register";
}

export function SignInForm(props: { state: SignInState }) {
  const s = props.state;
  const error = s.form !== "register" ? s.error : undefined;
  return (
    <PostForm action="/login" id="sign-in-form" label="Sign in">
      {error ? (
        <div class="form-error" role="alert" id="sign-in-error">
          {error}
        </div>
      ) : null}
      <FormField
        label="Email"
        name="email"
        type="email"
        autocomplete="username"
        required
        value={s.form !== "register" ? s.email : undefined}
        autofocus={!s.email}
      />
      <FormField label="Password" name="password" type="password" autocomplete="current-password" required autofocus={!!s.email} />
      <div class="actions">
        <Button variant="primary" id="sign-in">
          Sign in
        </Button>
      </div>
    </PostForm>
  );
}

function RegisterForm(props: { state: SignInState; first: boolean }) {
  const s = props.state;
  const error = s.form === "register" ? s.error : undefined;
  return (
    <PostForm action="/register" id="register-form" label="Create an account">
      {error ? (
        <div class="form-error" role="alert" id="register-error">
          {error}
        </div>
      ) : null}
      <FormField
        label="Email"
        name="email"
        type="email"
        autocomplete="username"
        required
        value={s.form === "register" ? s.email : undefined}
        id="reg-email"
        autofocus={props.first}
      />
      <FormField
        label="Password"
        name="password"
        type="password"
        autocomplete="new-password"
        required
        minlength={8}
        id="reg-password"
        hint="At least 8 characters. A long passphrase is best."
      />
      <FormField label="Repeat the password" name="password_again" type="password" autocomplete="new-password" required minlength={8} id="reg-password-again" />
      <div class="actions">
        <Button variant="primary" id="register">
          {props.first ? "Create the owner account" : "Create account"}
        </Button>
      </div>
    </PostForm>
  );
}

/** The page at `/` for a signed-out visitor. */
export function renderSignIn(c: ConsoleContext, mode: SignInMode, state: SignInState = {}, status: 200 | 400 | 401 | 403 | 409 | 429 = 200) {
  let body: Child;
  if (mode === "first-user") {
    body = (
      <div class="card">
        <p>
          This broker has no accounts yet. The first account becomes the <strong>owner</strong>: it can create vaults, invite people and agents, and change the
          instance settings.
        </p>
        <RegisterForm state={{ ...state, form: "register" }} first />
      </div>
    );
  } else {
    body = (
      <>
        <div class="card">
          <SignInForm state={state} />
          {/* Not on the first-user page: the owner registers with a password (contract §10). */}
          <ProviderSignIn provider={c.get("kit").d.oidc} returnTo="/" />
        </div>
        <details class="card disclosure" open={state.form === "register"}>
          <summary>New here? Create an account</summary>
          <p class="hint">The owner may limit sign-ups to some email domains. To join a vault, ask one of its admins for an invite.</p>
          <RegisterForm state={state} first={false} />
        </details>
      </>
    );
  }
  const title = mode === "first-user" ? "Set up this broker" : "Sign in";
  const lead = mode === "first-user" ? "Create the owner account to start." : "Manage the vaults, credentials and agents of this broker.";
  return renderPage(c, { title, lead, narrow: true, status }, body);
}

export async function signInMode(c: ConsoleContext): Promise<SignInMode> {
  return (await c.get("kit").d.store.users.count()) === 0 ? "first-user" : "sign-in";
}

/** Keeps a typed email for the re-rendered form only if it looks like one (it is escaped either way). */
function keptEmail(v: string | undefined): string | undefined {
  return typeof v === "string" && v.length <= 254 ? v.trim() : undefined;
}

export function signInRoutes() {
  const r = new Hono<ConsoleEnv>();
  // The AUTH tier (per client address) covers these anonymous, Argon2id-priced posts, as it does the API's.
  r.use("/login", async (c, next) => authTier(c.get("kit").d.rateLimiter)(c, next));
  r.use("/register", async (c, next) => authTier(c.get("kit").d.rateLimiter)(c, next));

  r.post("/login", async (c) => {
    const d = c.get("kit").d;
    const form = formOf(c);
    const email = keptEmail(form.email);
    try {
      const creds = parseWith(CredentialsInput, { email: form.email, password: form.password });
      const { token } = await loginUser(d, creds, clientIp(c), sessionClientOf(c, "form"));
      setSessionCookie(c, d, token.reveal()); // reveal: only into the HttpOnly session cookie
      return c.redirect("/", 303);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      if (err instanceof RateLimited) {
        // The login throttle's wait, in words for the person and in Retry-After for machines.
        c.header("retry-after", String(err.retryAfterSec));
        const wait = `Too many failed sign-in attempts. For your account's safety, wait ${plural(err.retryAfterSec, "second")} before trying again.`;
        return renderSignIn(c, await signInMode(c), { email, error: wait, form: "sign-in" }, 429);
      }
      const error = err.status === 400 ? describeError(err) : "That email and password do not match an account. Check both and try again.";
      return renderSignIn(c, await signInMode(c), { email, error, form: "sign-in" }, err.status === 400 ? 400 : 401);
    }
  });

  r.post("/register", async (c) => {
    const d = c.get("kit").d;
    const form = formOf(c);
    const email = keptEmail(form.email);
    const mode = await signInMode(c);
    if ((form.password ?? "") !== (form.password_again ?? "")) {
      return renderSignIn(c, mode, { email, error: "The two passwords differ. Type the same password twice.", form: "register" }, 400);
    }
    try {
      const creds = parseWith(CredentialsInput, { email: form.email, password: form.password });
      const { user, token } = await registerUser(d, creds, undefined, sessionClientOf(c, "form"));
      setSessionCookie(c, d, token.reveal()); // reveal: only into the HttpOnly session cookie
      const welcome = user.role === "owner" ? "Welcome! You are the owner of this broker. Create a vault to start." : "Welcome! Your account is ready.";
      return redirectWithFlash(c, "/", "success", welcome);
    } catch (err) {
      if (!(err instanceof BrokerError)) throw err;
      if (err instanceof RateLimited) c.header("retry-after", String(err.retryAfterSec));
      const status = err.status === 409 || err.status === 403 || err.status === 429 ? err.status : 400;
      return renderSignIn(c, mode, { email, error: describeError(err), form: "register" }, status);
    }
  });

  r.post("/logout", async (c) => {
    const { d } = c.get("kit");
    const user = c.get("user");
    if (user) await logout(d, user); // server-side: the token stops working everywhere at once
    clearPageCookie(c, d, "session");
    return redirectWithFlash(c, "/", "info", "You are signed out.");
  });

  return r;
}
