// The messages between sqlite-reader.ts (the main thread) and sqlite-read-worker.ts (the read thread).
// Values cross by structured clone (numbers, strings, bigints, null and Uint8Array arrive as they left), or
// as JSON text where every value is one JSON carries exactly.

import type { AnchorSigning } from "./audit-anchors.ts";
import type { UnsignedAnchor } from "./audit-chain-check.ts";
import type { SqlValue } from "./db.ts";

export type ReadRequest =
  | { readonly kind: "open"; readonly path: string; readonly busyTimeoutMs: number }
  | { readonly kind: "all" | "get"; readonly id: number; readonly sql: string; readonly params: readonly SqlValue[] }
  /**
   * One batch of audit retention on the worker's own writable connection (the one write it makes): the
   * statements are store/audit.ts's, sent along so the worker holds no SQL of its own.
   */
  | {
      readonly kind: "prune";
      readonly id: number;
      readonly sql: {
        readonly idBounds: string;
        readonly firstKept: string;
        readonly anchorsIn: string;
        readonly hashAt: string;
        readonly moveAnchor: string;
        readonly deleteRange: string;
      };
      readonly olderThan: number;
      readonly keepRows: number;
      readonly limit: number;
      /** Signs the anchors the batch moves (store/audit-anchors.ts). */
      readonly signing?: AnchorSigning;
      readonly waitForCheckpoints: boolean;
    }
  /**
   * One batch of the audit writer's records on the worker's writable connection (store/audit-batch.ts), as JSON
   * text: the journal's lines are JSON already, and every value a record holds is one JSON carries exactly.
   */
  | { readonly kind: "audit"; readonly id: number; readonly mark: string; readonly records: string }
  /** `done[0]` becomes 1 once the worker's connections are closed. */
  | { readonly kind: "close"; readonly done: Int32Array };

export type ReadReply =
  | { readonly kind: "opened" }
  | { readonly kind: "unopened"; readonly message: string; readonly code?: string }
  | { readonly kind: "rows"; readonly id: number; readonly rows: unknown[] }
  /** Rows of strings, finite numbers and nulls only, as JSON text: cheaper for the main thread to decode. */
  | { readonly kind: "json"; readonly id: number; readonly json: string }
  | { readonly kind: "row"; readonly id: number; readonly row: unknown }
  | {
      readonly kind: "pruned";
      readonly id: number;
      readonly removed: number;
      readonly more: boolean;
      readonly ms: number;
      readonly unsignedAnchors?: readonly UnsignedAnchor[];
      readonly waiting?: boolean;
    }
  /** Each vault's head seq after the audit batch, committed. */
  | { readonly kind: "audited"; readonly id: number; readonly heads: readonly (readonly [number, number])[] }
  | { readonly kind: "failed"; readonly id: number; readonly message: string; readonly code?: string }
  | { readonly kind: "closed" };
