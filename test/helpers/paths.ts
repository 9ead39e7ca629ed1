/** Repository paths for tests (compiled tests live in dist/test/, fixtures stay in the source tree). */
import { fileURLToPath } from "node:url";
import { join } from "node:path";

export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));
export const BERTH_BIN = join(REPO_ROOT, "bin", "berth");
export const MAGI_BIN = join(REPO_ROOT, "bin", "magi-code");
export const FIXTURES = join(REPO_ROOT, "test", "conformance", "fixtures");
