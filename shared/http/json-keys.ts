/**
 * The first of `names` that the top-level object of `text` (valid JSON, already parsed) holds more than
 * once, or undefined. JSON.parse keeps a repeated name's last value and another reader may keep its
 * first (RFC 8259 section 4 leaves it to the reader), so a reply that names `status` twice means
 * different things to different readers. Names are compared as decoded (`"st\u0061tus"` is `status`).
 * A text with no backslash in which each name's quoted form occurs at most once is answered without a
 * scan: that is every well-formed reply.
 */
export function repeatedTopLevelName(text: string, names: readonly string[]): string | undefined {
  if (!text.includes('\\') && names.every((n) => text.indexOf(`"${n}"`) === text.lastIndexOf(`"${n}"`))) return undefined;
  const wanted = new Set(names);
  const seen = new Set<string>();
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      const start = i;
      for (i++; text[i] !== '"'; i++) if (text[i] === '\\') i++;
      if (depth !== 1) continue;
      let j = i + 1;
      while (j < text.length && /\s/.test(text[j]!)) j++;
      if (text[j] !== ':') continue;
      const name = JSON.parse(text.slice(start, i + 1)) as string;
      if (!wanted.has(name)) continue;
      if (seen.has(name)) return name;
      seen.add(name);
    } else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') depth--;
  }
  return undefined;
}
