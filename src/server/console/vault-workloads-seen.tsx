/** @jsxImportSource hono/jsx */
// The Agents page's "Workloads seen" (issue 39): the platform identities (a CI job's repository and ref, a pod's
// service account) whose tokens were exchanged for sessions of this vault, under their binding's agent. Read by the
// domain's listWorkloadsSeen; names and times only.

import type { WorkloadSeen } from "../../identity/index.ts";
import { Name, Section, Table, Time } from "../ui/index.ts";
import { agentPath } from "./vault-agent.tsx";

export function WorkloadsSeenSection(props: { vault: string; workloads: readonly WorkloadSeen[] }) {
  if (props.workloads.length === 0) return null;
  return (
    <Section
      title={`Workloads seen (${props.workloads.length})`}
      id="workloads-seen"
      description="Workloads that signed in with their platform's token (a CI job, a Kubernetes pod) and act as a binding's agent. Kept for 30 days after their last session ends."
    >
      <Table
        id="workloads"
        rows={props.workloads}
        columns={[
          {
            label: "Workload",
            cell: (w) => (
              <>
                <Name>{w.subject}</Name>
                {w.issuer && <div class="muted small">{w.issuer}</div>}
              </>
            ),
          },
          {
            label: "As agent",
            cell: (w) =>
              w.agent.startsWith("removed ") ? (
                <span class="muted">{w.agent}</span>
              ) : (
                <a class="strong-link" href={agentPath(props.vault, w.agent)}>
                  <Name>{w.agent}</Name>
                </a>
              ),
          },
          { label: "Active sessions", class: "num", cell: (w) => `${w.active_sessions} of ${w.sessions}` },
          { label: "Last signed in", cell: (w) => <Time iso={w.last_exchange} /> },
          { label: "Last request", cell: (w) => <Time iso={w.last_used} /> },
        ]}
      />
    </Section>
  );
}
