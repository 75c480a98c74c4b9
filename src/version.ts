// The product version, printed by `broker --version` and the health endpoint.
import pkg from "../package.json" with { type: "json" };

export const VERSION: string = pkg.version;
