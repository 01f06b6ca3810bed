package telemetry

import "go.opentelemetry.io/otel/attribute"

// Semantic-convention attribute keys used on toolwire spans. They are
// spelled out here rather than imported from a semconv package: the GenAI
// keys moved between semconv versions, and these names are the stable
// contract dashboards and tests rely on.
const (
	// GenAI tool execution (https://opentelemetry.io/docs/specs/semconv/gen-ai/).
	GenAIOperationName = attribute.Key("gen_ai.operation.name")
	GenAIToolName      = attribute.Key("gen_ai.tool.name")
	GenAIToolCallID    = attribute.Key("gen_ai.tool.call.id")
	GenAIToolType      = attribute.Key("gen_ai.tool.type")

	// Messaging (https://opentelemetry.io/docs/specs/semconv/messaging/).
	MessagingSystem            = attribute.Key("messaging.system")
	MessagingOperationName     = attribute.Key("messaging.operation.name")
	MessagingOperationType     = attribute.Key("messaging.operation.type")
	MessagingDestinationName   = attribute.Key("messaging.destination.name")
	MessagingConsumerGroupName = attribute.Key("messaging.consumer.group.name")
	MessagingMessageID         = attribute.Key("messaging.message.id")
	MessagingDeliveryCount     = attribute.Key("messaging.nats.delivery_count")

	// ErrorType is the error type of a failed operation (error.type).
	ErrorType = attribute.Key("error.type")

	// toolwire's own.
	ExecutorType     = attribute.Key("toolwire.executor.type")
	Attempt          = attribute.Key("toolwire.attempt")
	Tenant           = attribute.Key("toolwire.tenant")
	AdmissionOutcome = attribute.Key("toolwire.admission.outcome")
	Pool             = attribute.Key("toolwire.pool")
)

// Fixed attribute values.
var (
	// OpExecuteTool marks the executor span.
	OpExecuteTool = GenAIOperationName.String("execute_tool")
	// SystemNATS marks every messaging span.
	SystemNATS = MessagingSystem.String("nats")
)
