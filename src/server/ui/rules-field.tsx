/** @jsxImportSource hono/jsx */
// Service rules on the approval page and in the console: a proposed service's rules beside today's
// (wider marked as a warning), worded by words/'s describeProposalChange, and the rules box a person
// edits (one rule per line, see rules-text.ts). Escaped text only; no secret passes here.

import { EVERYTHING, type ProposalChange } from "../../words/index.ts";

/**
 * The rules rows of one proposed service (inside a `dl.overview`): "Allowed now" when the vault has
 * a service for the host, what was asked for, and for a pending proposal the change against today.
 */
export function RulesReview(props: { change: ProposalChange["rules"]; id: string }) {
  const c = props.change;
  return (
    <>
      {c.now !== undefined ? (
        <>
          <dt>Allowed now</dt>
          <dd id={`${props.id}-now`}>{c.now}</dd>
        </>
      ) : null}
      <dt>{c.askedLabel}</dt>
      <dd id={`${props.id}-asked`}>
        {c.asked}
        {c.note ? <span class="muted"> {c.note}</span> : null}
      </dd>
      {c.wider ? (
        <dd class="rules-wider" id={`${props.id}-wider`}>
          <span class="badge badge-warning">{c.wider}</span> {c.added}
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
