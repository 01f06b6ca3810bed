import type { GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/content.proto.
 */
export declare const file_toolwire_v1_content: GenFile;
/**
 * Content is one block of a tool's output: MCP's content kinds, preserved
 * without loss.
 *
 * @generated from message toolwire.v1.Content
 */
export type Content = Message<"toolwire.v1.Content"> & {
    /**
     * @generated from oneof toolwire.v1.Content.kind
     */
    kind: {
        /**
         * @generated from field: toolwire.v1.TextContent text = 1;
         */
        value: TextContent;
        case: "text";
    } | {
        /**
         * @generated from field: toolwire.v1.ImageContent image = 2;
         */
        value: ImageContent;
        case: "image";
    } | {
        /**
         * @generated from field: toolwire.v1.AudioContent audio = 3;
         */
        value: AudioContent;
        case: "audio";
    } | {
        /**
         * @generated from field: toolwire.v1.ResourceLink resource_link = 4;
         */
        value: ResourceLink;
        case: "resourceLink";
    } | {
        /**
         * @generated from field: toolwire.v1.EmbeddedResource resource = 5;
         */
        value: EmbeddedResource;
        case: "resource";
    } | {
        case: undefined;
        value?: undefined;
    };
    /**
     * @generated from field: toolwire.v1.ContentAnnotations annotations = 6;
     */
    annotations?: ContentAnnotations | undefined;
    /**
     * MCP `_meta` of the block, as JSON text.
     *
     * @generated from field: string meta_json = 7;
     */
    metaJson: string;
};
/**
 * Describes the message toolwire.v1.Content.
 * Use `create(ContentSchema)` to create a new message.
 */
export declare const ContentSchema: GenMessage<Content>;
/**
 * @generated from message toolwire.v1.TextContent
 */
export type TextContent = Message<"toolwire.v1.TextContent"> & {
    /**
     * @generated from field: string text = 1;
     */
    text: string;
};
/**
 * Describes the message toolwire.v1.TextContent.
 * Use `create(TextContentSchema)` to create a new message.
 */
export declare const TextContentSchema: GenMessage<TextContent>;
/**
 * @generated from message toolwire.v1.ImageContent
 */
export type ImageContent = Message<"toolwire.v1.ImageContent"> & {
    /**
     * @generated from field: bytes data = 1;
     */
    data: Uint8Array;
    /**
     * @generated from field: string mime_type = 2;
     */
    mimeType: string;
};
/**
 * Describes the message toolwire.v1.ImageContent.
 * Use `create(ImageContentSchema)` to create a new message.
 */
export declare const ImageContentSchema: GenMessage<ImageContent>;
/**
 * @generated from message toolwire.v1.AudioContent
 */
export type AudioContent = Message<"toolwire.v1.AudioContent"> & {
    /**
     * @generated from field: bytes data = 1;
     */
    data: Uint8Array;
    /**
     * @generated from field: string mime_type = 2;
     */
    mimeType: string;
};
/**
 * Describes the message toolwire.v1.AudioContent.
 * Use `create(AudioContentSchema)` to create a new message.
 */
export declare const AudioContentSchema: GenMessage<AudioContent>;
/**
 * ResourceLink points at a resource without embedding it.
 *
 * @generated from message toolwire.v1.ResourceLink
 */
export type ResourceLink = Message<"toolwire.v1.ResourceLink"> & {
    /**
     * @generated from field: string uri = 1;
     */
    uri: string;
    /**
     * @generated from field: string name = 2;
     */
    name: string;
    /**
     * @generated from field: string title = 3;
     */
    title: string;
    /**
     * @generated from field: string description = 4;
     */
    description: string;
    /**
     * @generated from field: string mime_type = 5;
     */
    mimeType: string;
    /**
     * @generated from field: optional int64 size = 6;
     */
    size?: bigint | undefined;
    /**
     * Icons of the resource (MCP's `icons`).
     *
     * @generated from field: repeated toolwire.v1.Icon icons = 7;
     */
    icons: Icon[];
};
/**
 * Describes the message toolwire.v1.ResourceLink.
 * Use `create(ResourceLinkSchema)` to create a new message.
 */
export declare const ResourceLinkSchema: GenMessage<ResourceLink>;
/**
 * Icon is an icon of a tool or a resource (MCP's Icon).
 *
 * @generated from message toolwire.v1.Icon
 */
export type Icon = Message<"toolwire.v1.Icon"> & {
    /**
     * URI of the image: an https URL or a data: URI.
     *
     * @generated from field: string src = 1;
     */
    src: string;
    /**
     * MIME type, when the URI's own is missing or generic.
     *
     * @generated from field: string mime_type = 2;
     */
    mimeType: string;
    /**
     * Sizes the image suits, e.g. "48x48" or "any".
     *
     * @generated from field: repeated string sizes = 3;
     */
    sizes: string[];
    /**
     * "light" or "dark": the background the icon is designed for; empty =
     * any.
     *
     * @generated from field: string theme = 4;
     */
    theme: string;
};
/**
 * Describes the message toolwire.v1.Icon.
 * Use `create(IconSchema)` to create a new message.
 */
export declare const IconSchema: GenMessage<Icon>;
/**
 * EmbeddedResource carries a resource's contents inline.
 *
 * @generated from message toolwire.v1.EmbeddedResource
 */
export type EmbeddedResource = Message<"toolwire.v1.EmbeddedResource"> & {
    /**
     * @generated from field: string uri = 1;
     */
    uri: string;
    /**
     * @generated from field: string mime_type = 2;
     */
    mimeType: string;
    /**
     * @generated from oneof toolwire.v1.EmbeddedResource.contents
     */
    contents: {
        /**
         * @generated from field: string text = 3;
         */
        value: string;
        case: "text";
    } | {
        /**
         * @generated from field: bytes blob = 4;
         */
        value: Uint8Array;
        case: "blob";
    } | {
        case: undefined;
        value?: undefined;
    };
    /**
     * @generated from field: string meta_json = 5;
     */
    metaJson: string;
};
/**
 * Describes the message toolwire.v1.EmbeddedResource.
 * Use `create(EmbeddedResourceSchema)` to create a new message.
 */
export declare const EmbeddedResourceSchema: GenMessage<EmbeddedResource>;
/**
 * ContentAnnotations are MCP's annotations of a content block.
 *
 * @generated from message toolwire.v1.ContentAnnotations
 */
export type ContentAnnotations = Message<"toolwire.v1.ContentAnnotations"> & {
    /**
     * "user", "assistant".
     *
     * @generated from field: repeated string audience = 1;
     */
    audience: string[];
    /**
     * @generated from field: optional double priority = 2;
     */
    priority?: number | undefined;
    /**
     * RFC 3339.
     *
     * @generated from field: string last_modified = 3;
     */
    lastModified: string;
};
/**
 * Describes the message toolwire.v1.ContentAnnotations.
 * Use `create(ContentAnnotationsSchema)` to create a new message.
 */
export declare const ContentAnnotationsSchema: GenMessage<ContentAnnotations>;
