/**
 * The one error type that crosses layers: it carries the HTTP status and the message rendered as
 * `{"error": message}` by the API's error middleware. Domain code throws or returns it; nothing else
 * decides a status code.
 */
export class AppError extends Error {
  override name = 'AppError';
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const badRequest = (message: string) => new AppError(400, message);
export const unauthorized = (message: string) => new AppError(401, message);
export const forbidden = (message: string) => new AppError(403, message);
export const notFound = (message = 'not found') => new AppError(404, message);
export const conflict = (message: string) => new AppError(409, message);
export const unavailable = (message: string) => new AppError(503, message);
