/** @jsxImportSource hono/jsx */
// The decided proposals of the console's Proposals page (vault-proposals.tsx): one page of them, newest
// first, with who asked, the hosts and keys, the outcome and who decided, and the link to older ones.
// Names and key names only, never a value.

import type { ProposalReview } from "../../workflows/index.ts";
import { Badge, Name, Time, toneOf } from "../ui/index.ts";
import { vaultPath } from "./layout.tsx";
import { PageLinks } from "./page-links.tsx";

/** A page of decided proposals, and the links to older ones and back to the newest. */
export function ProposalHistory(props: { rows: readonly ProposalReview[]; vault: string; next: string | null; later: boolean }) {
  return (
    <>
      <HistoryTable rows={props.rows} later={props.later} />
      <PageLinks
        id="proposal-pages"
        label="Proposal pages"
        base={vaultPath(props.vault, "proposals")}
        param="before"
        next={props.next}
        later={props.later}
        word="Older"
      />
    </>
  );
}

function HistoryTable(props: { rows: readonly ProposalReview[]; later: boolean }) {
  if (props.rows.length === 0) return <p class="muted">{props.later ? "No more decided proposals." : "No decided proposals yet."}</p>;
  return (
    <div class="table-wrap">
      <table class="table" id="proposal-history">
        <thead>
          <tr>
            <th scope="col">Proposal</th>
            <th scope="col">From</th>
            <th scope="col">Hosts and credentials</th>
            <th scope="col">Outcome</th>
            <th scope="col">Decided</th>
          </tr>
        </thead>
        <tbody>
          {props.rows.map((p) => (
            <tr>
              <td data-label="Proposal">
                <span class="cell">#{p.id}</span>
              </td>
              <td data-label="From">
                <span class="cell">{p.requested_by}</span>
              </td>
              <td data-label="Hosts and credentials">
                <span class="cell">
                  {[...p.services.map((s) => s.host), ...p.credentials.map((s) => s.key)].map((n) => (
                    <>
                      <Name>{n}</Name>{" "}
                    </>
                  ))}
                </span>
              </td>
              <td data-label="Outcome">
                <span class="cell">
                  <Badge tone={toneOf(p.status)}>{p.status}</Badge>
                  {p.decided_by ? <span class="small"> by {p.decided_by}</span> : null}
                </span>
              </td>
              <td data-label="Decided">
                <span class="cell">
                  <Time iso={p.decided_at} empty="—" />
                </span>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
