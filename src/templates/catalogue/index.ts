// The catalogue: every template of every kind in one list, sorted by id (each entry is a Template;
// shape.ts says why it is typed by its own restatement here).

import type { Entry } from "./shape.ts";
import { AI } from "./ai.ts";
import { CODE } from "./code.ts";
import { INFRA } from "./infra.ts";
import { PAYMENTS_COMMS } from "./payments-comms.ts";
import { WORK } from "./work.ts";

export const TEMPLATES: readonly Entry[] = [...CODE, ...AI, ...PAYMENTS_COMMS, ...WORK, ...INFRA].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
