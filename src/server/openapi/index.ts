// The OpenAPI 3.1 document, built from each route's description and the contract's schemas.

export { describe } from "./describe.ts";
export { buildOpenApi } from "./document.ts";
export { BODY_SCHEMA } from "./describe.ts";
