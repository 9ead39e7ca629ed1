/**
 * A loopback fake OpenAI auth issuer: `/oauth/authorize` (consent is automatic: 302 to the
 * redirect URI with a code and the request's state) and `/oauth/token` (authorization_code with
 * PKCE verification, refresh_token with rotation). Every code and token contains `SECRETMARKER`.
 */
import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeOAuthBehaviour {
  accountId: string;
  /** Status for authorization_code grants (200 = success). */
  tokenStatus: number;
  /** Status for refresh grants (200 = success; 400 answers invalid_grant). */
  refreshStatus: number;
  omitRefreshToken: boolean;
  expiresIn: number;
  /** When set, the token endpoint waits for this promise before answering. */
  gate: Promise<void> | null;
  /** When set, the access token every grant answers (a broken issuer's). */
  accessToken?: string;
}

interface PendingCode { challenge: string; redirectUri: string; clientId: string }

export class FakeOAuthIssuer {
  readonly behaviour: FakeOAuthBehaviour = { accountId: "acct-SECRETMARKER-1", tokenStatus: 200, refreshStatus: 200, omitRefreshToken: false, expiresIn: 3600, gate: null };
  tokenRequests = 0;
  /** Every HTTP request received, any path (`METHOD /path`). */
  readonly calls: string[] = [];
  refreshRequests = 0;
  private n = 0;
  private readonly codes = new Map<string, PendingCode>();
  private readonly refreshTokens = new Set<string>();

  private constructor(private readonly server: Server, readonly url: string) {}

  static async start(): Promise<FakeOAuthIssuer> {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const fake = new FakeOAuthIssuer(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.on("request", (req, res) => void fake.handle(req, res));
    return fake;
  }

  /** Plays the browser: follows the authorization URL and returns the redirect target (code + state). */
  async authorize(authUrl: string): Promise<string> {
    const res = await fetch(authUrl, { redirect: "manual" });
    const loc = res.headers.get("location");
    if (res.status !== 302 || loc === null) throw new Error("authorize failed");
    return loc.replace("//localhost:", "//127.0.0.1:");
  }

  /** A refresh token the issuer will accept (for seeding the store). */
  mintRefreshToken(): string {
    const t = `refresh-SECRETMARKER-seed-${++this.n}`;
    this.refreshTokens.add(t);
    return t;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", this.url);
    this.calls.push(`${req.method ?? "?"} ${url.pathname}`);
    if (req.method === "GET" && url.pathname === "/oauth/authorize") {
      const q = url.searchParams;
      const code = `code-SECRETMARKER-${++this.n}`;
      this.codes.set(code, { challenge: q.get("code_challenge") ?? "", redirectUri: q.get("redirect_uri") ?? "", clientId: q.get("client_id") ?? "" });
      const target = new URL(q.get("redirect_uri") ?? "http://127.0.0.1/");
      target.searchParams.set("code", code);
      target.searchParams.set("state", q.get("state") ?? "");
      res.writeHead(302, { location: target.href }).end();
      return;
    }
    if (req.method === "POST" && url.pathname === "/oauth/token") {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const form = new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
      if (this.behaviour.gate !== null) await this.behaviour.gate;
      const grant = form.get("grant_type");
      if (grant === "authorization_code") {
        this.tokenRequests++;
        const code = form.get("code") ?? "";
        const pending = this.codes.get(code);
        this.codes.delete(code);
        const verifier = form.get("code_verifier") ?? "";
        const ok =
          pending !== undefined &&
          pending.clientId === form.get("client_id") &&
          pending.redirectUri === form.get("redirect_uri") &&
          createHash("sha256").update(verifier).digest("base64url") === pending.challenge;
        if (!ok || this.behaviour.tokenStatus !== 200) return this.json(res, ok ? this.behaviour.tokenStatus : 400, { error: "invalid_grant" });
        return this.json(res, 200, this.tokens(form.get("client_id") ?? ""));
      }
      if (grant === "refresh_token") {
        this.refreshRequests++;
        const rt = form.get("refresh_token") ?? "";
        if (!this.refreshTokens.has(rt) || this.behaviour.refreshStatus !== 200) {
          return this.json(res, this.behaviour.refreshStatus === 200 ? 400 : this.behaviour.refreshStatus, { error: "invalid_grant" });
        }
        this.refreshTokens.delete(rt);
        return this.json(res, 200, this.tokens(form.get("client_id") ?? ""));
      }
      return this.json(res, 400, { error: "unsupported_grant_type" });
    }
    res.writeHead(404).end();
  }

  private tokens(clientId: string): Record<string, unknown> {
    const i = ++this.n;
    const now = Math.floor(Date.now() / 1000);
    const b64 = (o: unknown): string => Buffer.from(JSON.stringify(o)).toString("base64url");
    const idToken = `${b64({ alg: "RS256", typ: "JWT" })}.${b64({
      iss: this.url,
      aud: clientId,
      sub: "user-SECRETMARKER",
      iat: now,
      exp: now + 3600,
      "https://api.openai.com/auth": { chatgpt_account_id: this.behaviour.accountId },
    })}.c2lnU0VDUkVUTUFSS0VS`;
    const out: Record<string, unknown> = { access_token: this.behaviour.accessToken ?? `access-SECRETMARKER-${i}`, token_type: "Bearer", expires_in: this.behaviour.expiresIn, id_token: idToken };
    if (!this.behaviour.omitRefreshToken) {
      const rt = `refresh-SECRETMARKER-${i}`;
      this.refreshTokens.add(rt);
      out["refresh_token"] = rt;
    }
    return out;
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { "content-type": "application/json", "cache-control": "no-store" }).end(JSON.stringify(body));
  }
}
