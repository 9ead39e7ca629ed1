/** URI templates of changeset catalogues, matched without regular expressions. Pure. */

/**
 * Whether `uri` is an expansion of `template`, each `{…}` standing for one or more characters other than `/`.
 * A set of reachable positions advanced part by part, O(uri length × template length) at worst: the template is a
 * backend's (4,096 characters at most), and the regular expression this replaced (`^a[^/]+a[^/]+…$`) backtracked
 * exponentially, so a hostile catalogue held the daemon's event loop for good at the first review.
 */
export function matchesUriTemplate(template: string, uri: string): boolean {
  // Literal parts; a variable lies between each two (a `{` with no `}` after it is literal text).
  const literals: string[] = [];
  let at = 0;
  for (;;) {
    const open = template.indexOf("{", at);
    const close = open === -1 ? -1 : template.indexOf("}", open + 1);
    if (close === -1) {
      literals.push(template.slice(at));
      break;
    }
    literals.push(template.slice(at, open));
    at = close + 1;
  }
  const n = uri.length;
  let reach = new Uint8Array(n + 1);
  if (!uri.startsWith(literals[0]!)) return false;
  reach[literals[0]!.length] = 1;
  for (let k = 1; k < literals.length; k++) {
    // A variable: from a reachable position, one or more characters up to the next `/`.
    const after = new Uint8Array(n + 1);
    let open = false;
    let any = false;
    for (let p = 0; p < n; p++) {
      if (reach[p] === 1) open = true;
      if (uri.charCodeAt(p) === 47) open = false;
      else if (open) after[p + 1] = 1;
    }
    // Then the literal.
    const lit = literals[k]!;
    reach = new Uint8Array(n + 1);
    for (let p = 0; p + lit.length <= n; p++) {
      if (after[p] === 1 && uri.startsWith(lit, p)) {
        reach[p + lit.length] = 1;
        any = true;
      }
    }
    if (!any) return false;
  }
  return reach[n] === 1;
}
