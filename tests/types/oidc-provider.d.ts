// oidc-provider ships no TypeScript types (and @types/oidc-provider is not a dependency): the little
// the test helper (tests/helpers/oidc-provider.ts) uses, loosely typed.
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";
  export class Check {
    static REQUEST_PROMPT: boolean;
    static NO_NEED_TO_PROMPT: boolean;
    constructor(reason: string, description: string, check: (ctx: any) => unknown);
  }
  export const interactionPolicy: {
    base(): { get(name: string): { checks: { add(c: Check): void } } | undefined } & unknown[];
    Check: typeof Check;
  };
  export default class Provider {
    constructor(issuer: string, configuration: Record<string, any>);
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<{ uid: string; params: Record<string, unknown>; prompt: { name: string } }>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      opts?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
    on(event: string, listener: (...args: any[]) => void): this;
    Grant: new (p: {
      accountId: string;
      clientId: string;
    }) => { addOIDCScope(scope: string): void; save(): Promise<string> };
    Client: any;
  }
}
