// Model APIs: OpenAI, Anthropic, Google Gemini, Mistral, Groq, Cohere, DeepSeek, xAI, OpenRouter,
// Together, Fireworks, Perplexity, Hugging Face and Replicate. Inference is a POST, so an agent that
// calls a model needs write; read lists models and reads back jobs, files and results.

import { allow, approveEach, DELETE, READ, type Entry } from "./shape.ts";

const INFER = "call models (chat, completions, embeddings and the like) and create files, batches and jobs";

export const AI: readonly Entry[] = [
  {
    id: "openai",
    name: "OpenAI",
    hosts: ["api.openai.com"],
    auth: { type: "bearer", token: "OPENAI_API_KEY" },
    docs: "https://platform.openai.com/docs/api-reference/authentication",
    obtain: "https://platform.openai.com/api-keys",
    operations: {
      read: { summary: "list models; read files, batches, responses and fine-tuning jobs", rules: [allow(READ, ["/v1/**"])] },
      write: {
        summary: `${INFER}; each new fine-tuning job waits for a person`,
        rules: [allow(["POST"], ["/v1/**"]), approveEach(["POST"], ["/v1/fine_tuning/jobs"])],
      },
      destructive: { summary: "delete files, fine-tuned models, vector stores and stored responses", rules: [allow(DELETE, ["/v1/**"])] },
    },
  },
  {
    id: "anthropic",
    name: "Anthropic",
    hosts: ["api.anthropic.com"],
    auth: { type: "header", header: "x-api-key", token: "ANTHROPIC_API_KEY" },
    docs: "https://docs.anthropic.com/en/api/overview",
    obtain: "https://console.anthropic.com/settings/keys",
    operations: {
      read: { summary: "list models; read message batches and files", rules: [allow(READ, ["/v1/**"])] },
      write: {
        summary: "send messages, count tokens, create batches and upload files (the agent sends anthropic-version)",
        rules: [allow(["POST"], ["/v1/**"])],
      },
      destructive: { summary: "delete message batches and files", rules: [allow(DELETE, ["/v1/**"])] },
    },
  },
  {
    id: "gemini",
    name: "Google Gemini",
    hosts: ["generativelanguage.googleapis.com"],
    auth: { type: "header", header: "x-goog-api-key", token: "GEMINI_API_KEY" },
    docs: "https://ai.google.dev/api",
    obtain: "https://aistudio.google.com/app/apikey",
    operations: {
      read: { summary: "list models; read files, cached contents and tuned models", rules: [allow(READ, ["/v1beta/**", "/v1/**"])] },
      write: {
        summary: "generate content, embed, count tokens, upload files and cache contents",
        rules: [allow(["POST", "PATCH"], ["/v1beta/**", "/v1/**", "/upload/v1beta/**"])],
      },
      destructive: { summary: "delete files, cached contents and tuned models", rules: [allow(DELETE, ["/v1beta/**", "/v1/**"])] },
    },
  },
  {
    id: "mistral",
    name: "Mistral AI",
    hosts: ["api.mistral.ai"],
    auth: { type: "bearer", token: "MISTRAL_API_KEY" },
    docs: "https://docs.mistral.ai/api/",
    obtain: "https://console.mistral.ai/api-keys",
    operations: {
      read: { summary: "list models; read files, batches and fine-tuning jobs", rules: [allow(READ, ["/v1/**"])] },
      write: { summary: INFER, rules: [allow(["POST", "PATCH"], ["/v1/**"])] },
      destructive: { summary: "delete files and fine-tuned models", rules: [allow(DELETE, ["/v1/**"])] },
    },
  },
  {
    id: "groq",
    name: "Groq",
    hosts: ["api.groq.com"],
    auth: { type: "bearer", token: "GROQ_API_KEY" },
    docs: "https://console.groq.com/docs/api-reference",
    obtain: "https://console.groq.com/keys",
    operations: {
      read: { summary: "list models; read files and batches", rules: [allow(READ, ["/openai/v1/**"])] },
      write: { summary: "chat completions, transcription and translation; create files and batches", rules: [allow(["POST"], ["/openai/v1/**"])] },
    },
  },
  {
    id: "cohere",
    name: "Cohere",
    hosts: ["api.cohere.com"],
    auth: { type: "bearer", token: "COHERE_API_KEY" },
    docs: "https://docs.cohere.com/reference/chat",
    obtain: "https://dashboard.cohere.com/api-keys",
    operations: {
      read: { summary: "list models; read datasets, embed jobs and batches", rules: [allow(READ, ["/v1/**", "/v2/**"])] },
      write: { summary: "chat, embed, rerank and classify; create datasets and jobs", rules: [allow(["POST"], ["/v1/**", "/v2/**"])] },
      destructive: { summary: "delete datasets and connectors", rules: [allow(DELETE, ["/v1/**", "/v2/**"])] },
    },
  },
  {
    id: "deepseek",
    name: "DeepSeek",
    hosts: ["api.deepseek.com"],
    auth: { type: "bearer", token: "DEEPSEEK_API_KEY" },
    docs: "https://api-docs.deepseek.com/api/deepseek-api",
    obtain: "https://platform.deepseek.com/api_keys",
    operations: {
      read: { summary: "list models and read the account balance", rules: [allow(READ, ["/**"])] },
      write: { summary: "chat and FIM completions", rules: [allow(["POST"], ["/**"])] },
    },
  },
  {
    id: "xai",
    name: "xAI",
    hosts: ["api.x.ai"],
    auth: { type: "bearer", token: "XAI_API_KEY" },
    docs: "https://docs.x.ai/api",
    obtain: "https://console.x.ai/",
    operations: {
      read: { summary: "list models and read the key's details", rules: [allow(READ, ["/v1/**"])] },
      write: { summary: "chat completions, responses, embeddings and image generation", rules: [allow(["POST"], ["/v1/**"])] },
    },
  },
  {
    id: "openrouter",
    name: "OpenRouter",
    hosts: ["openrouter.ai"],
    auth: { type: "bearer", token: "OPENROUTER_API_KEY" },
    docs: "https://openrouter.ai/docs/api-keys",
    obtain: "https://openrouter.ai/settings/keys",
    operations: {
      read: { summary: "list models and read the key's credits and generations", rules: [allow(READ, ["/api/v1/**"])] },
      write: { summary: "chat and text completions through any routed model", rules: [allow(["POST"], ["/api/v1/**"])] },
    },
  },
  {
    id: "together",
    name: "Together AI",
    hosts: ["api.together.xyz", "api.together.ai"],
    auth: { type: "bearer", token: "TOGETHER_API_KEY" },
    docs: "https://docs.together.ai/reference/chat-completions-1",
    obtain: "https://api.together.ai/settings/api-keys",
    operations: {
      read: { summary: "list models; read files, fine-tuning jobs and endpoints", rules: [allow(READ, ["/v1/**"])] },
      write: { summary: INFER, rules: [allow(["POST", "PATCH"], ["/v1/**"])] },
      destructive: { summary: "delete files and endpoints", rules: [allow(DELETE, ["/v1/**"])] },
    },
  },
  {
    id: "fireworks",
    name: "Fireworks AI",
    hosts: ["api.fireworks.ai"],
    auth: { type: "bearer", token: "FIREWORKS_API_KEY" },
    docs: "https://fireworks.ai/docs/api-reference/get-secret",
    obtain: "https://app.fireworks.ai/settings/users/api-keys",
    operations: {
      read: { summary: "list models; read deployments, datasets and jobs", rules: [allow(READ, ["/inference/v1/**", "/v1/**"])] },
      write: {
        summary: "call models (chat, completions, embeddings); create and change deployments, datasets and jobs",
        rules: [allow(["POST"], ["/inference/v1/**"]), allow(["POST", "PATCH"], ["/v1/**"])],
      },
      destructive: { summary: "delete deployments, models and datasets", rules: [allow(DELETE, ["/v1/**"])] },
    },
  },
  {
    id: "perplexity",
    name: "Perplexity",
    hosts: ["api.perplexity.ai"],
    auth: { type: "bearer", token: "PERPLEXITY_API_KEY" },
    docs: "https://docs.perplexity.ai/api-reference/chat-completions",
    obtain: "https://www.perplexity.ai/settings/api",
    operations: {
      read: { summary: "read back asynchronous completions", rules: [allow(READ, ["/**"])] },
      write: { summary: "chat completions (with web search) and search", rules: [allow(["POST"], ["/**"])] },
    },
  },
  {
    id: "huggingface",
    name: "Hugging Face",
    hosts: ["router.huggingface.co", "huggingface.co"],
    auth: { type: "bearer", token: "HF_TOKEN" },
    docs: "https://huggingface.co/docs/inference-providers/index",
    obtain: "https://huggingface.co/settings/tokens",
    operations: {
      read: { summary: "list models; read models, datasets and Spaces on the Hub", rules: [allow(READ, ["/**"])] },
      write: { summary: "call models through Inference Providers; create and change Hub repositories", rules: [allow(["POST", "PUT"], ["/**"])] },
      destructive: {
        summary: "delete Hub files and branches; deleting a repository waits for a person",
        rules: [allow(DELETE, ["/api/**"]), approveEach(DELETE, ["/api/repos/delete"])],
      },
    },
  },
  {
    id: "replicate",
    name: "Replicate",
    hosts: ["api.replicate.com"],
    auth: { type: "bearer", token: "REPLICATE_API_TOKEN" },
    docs: "https://replicate.com/docs/topics/security/api-tokens",
    obtain: "https://replicate.com/account/api-tokens",
    operations: {
      read: { summary: "read models, predictions, trainings and deployments", rules: [allow(READ, ["/v1/**"])] },
      write: { summary: "run predictions and trainings; create and change deployments and models", rules: [allow(["POST", "PATCH"], ["/v1/**"])] },
      destructive: { summary: "delete deployments, models and model versions", rules: [allow(DELETE, ["/v1/**"])] },
    },
  },
];
