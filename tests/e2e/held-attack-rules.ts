// The service rules every request-approval attack suite plays against: a broad rule listed first
// (it must never let a held request past the human), a POST that needs a human each time, and a
// DELETE on a pattern that does.

export const ATTACK_RULES = [
  { methods: ["GET", "POST"], paths: ["/v1/**"] },
  { methods: ["POST"], paths: ["/v1/refunds"], approve: "each" },
  { methods: ["DELETE"], paths: ["/v1/customers/*"], approve: "each" },
];

/** A short unique marker, to find one test's request among the upstream's. */
export const uid = () => crypto.randomUUID().slice(0, 8);
