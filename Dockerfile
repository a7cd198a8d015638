# One image for every role; compose picks the role with ROLES.
# The Node release npm's scripts pin (package.json's dev dependency node): the image runs the runtime the
# tests and the bench ran, and a Node update is a change of both, reviewed and measured like any other.
FROM node:24.21.0-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

# esbuild, which bundles the service below, is a runtime dependency, so dev dependencies stay out.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

COPY tsconfig.json ./
COPY scripts/build.mjs scripts/
COPY shared/ shared/
COPY projections/ projections/
COPY services/ services/
# The service and its tools, each one file of dist/ (npm run build): a process is ready in about half a
# second, at some 40 MB less memory than when tsx loads the sources (docs/operations.md, "Starting").
RUN node scripts/build.mjs

# The service's Node flags (shared/runtime.ts) for every node process the image runs, whatever command starts
# it: V8's young generation at 16 MB a semi-space, where Node 24 would grow it to 64 MB (docs/operations.md,
# Memory).
ENV NODE_OPTIONS="--max-semi-space-size=16"

USER node
EXPOSE 8080
# In a container the service is reached through its network interface, not loopback (the default).
ENV HOST=0.0.0.0

# Every role listens on PORT (the api its routes, the others /healthz, /readyz and /metrics).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/main.mjs"]
