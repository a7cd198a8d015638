# One image for every role; compose picks the role with ROLES.
FROM node:20-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

# tsx runs the TypeScript sources directly and is a runtime dependency, so dev dependencies stay out.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force

COPY tsconfig.json ./
COPY shared/ shared/
COPY projections/ projections/
COPY services/ services/

USER node
EXPOSE 8080

# No HEALTHCHECK here: only the api role serves HTTP; compose.yaml checks the api container.
CMD ["node", "--import", "tsx", "services/main.ts"]
