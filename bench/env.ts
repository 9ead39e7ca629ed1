/**
 * The environment a bench gives the processes it measures: this one's, without Berth's own settings (`MC_*`,
 * `BERTH_*`, `SCV_*`: each run names its own state root) and without credential-like variables.
 */
export function benchEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^(MC_|BERTH_|SCV_)/.test(k) && !/KEY|TOKEN|SECRET/i.test(k)) env[k] = v;
  return env;
}
