/**
 * What `p` settles to, or, if `ms` pass first, what `late()` returns (or throws). The timer is cleared as
 * soon as either is there, and `p` goes on by itself: a rejection of it that comes later is handled (the
 * race listens to it), never unhandled.
 */
export async function within<T, L>(p: Promise<T>, ms: number, late: () => L): Promise<T | L> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<L>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(late());
      } catch (err) {
        reject(err);
      }
    }, ms);
  });
  try {
    return await Promise.race([p, expired]);
  } finally {
    clearTimeout(timer);
  }
}
