/** @jsxImportSource hono/jsx */
// Service rules on the approval page and in the console: the rules in plain words, what a proposal
// asks for against what the vault allows today (wider marked as a warning), and the rules box a
// person edits (one rule per line, see rules-text.ts). Escaped text only; no secret passes here.

import { describeRules, type Rules } from "../../policy/index.ts";
import { widening } from "./rules-text.ts";

export const EVERYTHING = "every method and path";

/** The rules in words, "every method and path" when there are none. */
export function rulesInWords(rules: Rules | undefined): string {
  return rules ? describeRules(rules) : EVERYTHING;
}

/** How a proposed service's rules compare with today's: "wider", "narrower", "same" or "new" (no service yet). */
export type RulesChangeKind = "new" | "wider" | "narrower" | "same";

export function rulesChange(current: { rules?: Rules } | undefined, asked: Rules | undefined): { kind: RulesChangeKind; added?: Rules | "everything" } {
  if (!current) return { kind: "new" };
  const added = widening(current.rules, asked);
  if (added) return { kind: "wider", added };
  return { kind: widening(asked, current.rules) ? "narrower" : "same" };
}

/**
 * The rules rows of one proposed service (inside a `dl.overview`): "Allowed now" when the vault has
 * a service for the host, "Asked for", and for a pending proposal the change against today.
 */
export function RulesReview(props: { asked: Rules | undefined; current: { rules?: Rules } | undefined; pending: boolean; id: string }) {
  const change = rulesChange(props.current, props.asked);
  return (
    <>
      {props.current ? (
        <>
          <dt>Allowed now</dt>
          <dd id={`${props.id}-now`}>{rulesInWords(props.current.rules)}</dd>
        </>
      ) : null}
      <dt>{props.pending && props.current ? "After approval" : "Asked for"}</dt>
      <dd id={`${props.id}-asked`}>
        {rulesInWords(props.asked)}
        {props.pending && change.kind === "same" ? <span class="muted"> (unchanged)</span> : null}
        {props.pending && change.kind === "narrower" ? <span class="muted"> (narrower than now)</span> : null}
        {!props.current && !props.asked ? <span class="muted"> on this host</span> : null}
      </dd>
      {props.pending && change.kind === "wider" ? (
        <dd class="rules-wider" id={`${props.id}-wider`}>
          <span class="badge badge-warning">wider than now</span>{" "}
          {change.added === "everything" ? "The rules would be removed: every method and path allowed." : <>Adds {describeRules(change.added!)}.</>}
        </dd>
      ) : null}
    </>
  );
}

/** The editable rules box of one service; `name` is the form field, `value` the text to show. */
export function RulesBox(props: { id: string; name: string; value: string; label: string; intro?: string; empty?: string }) {
  const lines = props.value.split("\n").length;
  return (
    <div class="field rules-field">
      <label for={props.id}>{props.label}</label>
      <textarea
        id={props.id}
        name={props.name}
        class="rules-box"
        rows={Math.min(12, Math.max(3, lines + 1))}
        maxlength={16000}
        spellcheck={false}
        autocomplete="off"
        autocapitalize="off"
        aria-describedby={`${props.id}-hint`}
      >
        {props.value}
      </textarea>
      <p class="hint" id={`${props.id}-hint`}>
        {props.intro ? <>{props.intro} </> : null}
        One rule per line: the methods, then the paths, e.g. <code>GET HEAD /repos/*/issues/**</code>. <code>*</code> is one path segment, <code>**</code> any
        number. {props.empty ?? `Leave it empty to allow ${EVERYTHING}.`}
      </p>
    </div>
  );
}
